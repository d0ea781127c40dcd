package dev

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every developer API answer decodes every field: each fixture (every
// field set, nullable ones both ways) is decoded into its type and encoded
// again, and must come back the same.
func TestDecodeEveryAnswer(t *testing.T) {
	const (
		kit     = `{"kitId":"k","slug":"deploy-bot","displayName":"Deploy bot","distribution":"unlisted","state":"active","createdAt":"2026-05-01T09:00:00Z","latestVersion":"1.1.0","latestPublishedVersion":null,"installedHere":true}`
		version = `{"id":"v","version":"1.1.0","published":true,"publishedAt":"2026-05-01T09:10:00Z","createdAt":"2026-05-01T09:00:00Z","consentHash":"aa","manifestHash":"bb","distribution":"unlisted"}`
		domain  = `{"domain":"example.com","method":"dns","verified":true,"verifiedAt":"2026-05-01T09:20:00Z","challenge":"ch","proof":{"dns":{"type":"TXT","host":"_kit-challenge.example.com","value":"kit-verification=ch"},"wellKnown":{"url":"https://example.com/.well-known/kit-verification.json","body":{"kitId":"k","token":"ch"}}}}`
		access  = `"access":"read","dataClass":"standard","audience":"any"`
	)
	tests := []struct {
		name string
		into any
		body string
	}{
		{"me", &Me{}, `{"workspaceId":"w","userId":"u","sandbox":true,"token":{"id":"t","name":"ci","createdAt":"2026-05-01T09:00:00Z","expiresAt":"2026-07-30T09:00:00Z","lastUsedAt":"2026-05-01T09:01:00Z","revokedAt":null}}`},
		{"kit list", &KitList{}, `{"kits":[` + kit + `]}`},
		{"kit detail", &KitDetailResponse{}, `{"detail":{"kit":` + kit + `,"versions":[` + version + `],"domains":[` + domain + `],"credentials":{"clientSecret":{"createdAt":"2026-05-01T09:00:00Z"},"signingSecret":{"generation":2,"createdAt":"2026-05-01T09:00:00Z","previousExpiresAt":"2026-05-08T09:00:00Z"}},"installLink":{"active":true,"createdAt":"2026-05-01T09:30:00Z"},"endpointHosts":["api.example.com"],"unverifiedHosts":[]}}`},
		{"kit detail without secrets", &KitDetailResponse{}, `{"detail":{"kit":` + kit + `,"versions":[],"domains":[],"credentials":{},"installLink":{"active":false,"createdAt":null},"endpointHosts":[],"unverifiedHosts":[]}}`},
		{"version result", &VersionResult{}, `{"kitId":"k","created":true,"version":` + version + `,"installationId":null}`},
		{"validation", &Validation{}, `{"valid":true,"problems":[],"warnings":[{"path":"bot.scopes[2]","message":"is useless on a bot"}],` +
			`"consent":{"slug":"deploy-bot","version":"1.1.0","official":false,"displayName":"Deploy bot","description":"Deploys","developerName":"Acme","privacyPolicyUrl":"https://example.com/p","iconUrl":null,"categories":["ops"],"sample":false,` +
			`"externalAuth":{"displayName":"GitHub","requiredScopes":["repo"],"optionalScopes":[]},"botScopes":["messages:write"],"tools":[{"name":"deploy","displayName":"Deploy","description":"Deploys",` + access + `}],` +
			`"requestedModelDataPolicy":"none","consentHash":"aa","available":true,"installed":false,"ownedByWorkspace":true,"userScopes":["runs:read"]},` +
			`"hosts":["api.example.com"],"unverifiedHosts":["api.example.com"],` +
			`"diff":{"addedBotScopes":["files:read"],"removedBotScopes":[],"addedUserScopes":[],"removedUserScopes":[],"addedTools":[{"name":"deploy",` + access + `}],"removedTools":["old"],` +
			`"changedTools":[{"name":"lookup","from":{` + access + `},"to":{` + access + `},"wider":false}],"addedEvents":[],"removedEvents":[],"addedCommands":["/deploy"],"removedCommands":[],` +
			`"externalAuth":"added","modelDataPolicy":{"from":"none","to":"answer"},"wider":true},"existingKitId":"k"}`},
		{"log page", &LogPage{}, `{"entries":[{"id":"e","at":"2026-05-01T09:00:00Z","source":"delivery","level":"error","event":"event.delivered","installationId":"i","status":"timeout","errorCode":"kit_unavailable","durationMs":3001,"httpStatus":504,"attempt":2},` +
			`{"id":"e2","at":"2026-05-01T09:00:00Z","source":"audit","level":"info","event":"version.uploaded","installationId":null,"status":null,"errorCode":null,"durationMs":null,"httpStatus":null,"attempt":null}],"nextCursor":"c","sources":["tool_call","audit","delivery"]}`},
		{"domain result", &DomainResult{}, `{"domain":` + domain + `}`},
		{"new install link", &InstallLinkResult{}, `{"installLink":{"active":true,"createdAt":"2026-05-01T09:30:00Z","url":"https://kit.example.com/app/kits/install?link=kil_x"}}`},
		{"dev install", &DevInstall{}, `{"kitId":"k","slug":"deploy-bot","version":"1.1.0","installationId":"i","endpoints":["https://tunnel.example.com/events"],"signingSecret":{"signingSecret":"kss_x","generation":1,"previousExpiresAt":"2026-05-08T09:00:00Z"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := json.Unmarshal([]byte(tt.body), tt.into); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(tt.into)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			_ = json.Unmarshal(again, &got)
			_ = json.Unmarshal([]byte(tt.body), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded and encoded again:\n got %s\nwant %s", again, tt.body)
			}
		})
	}
}
