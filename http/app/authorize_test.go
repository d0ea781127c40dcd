package app

import (
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/proto/kitpb"
)

// consentHidden reads a consent page's hidden inputs as the browser posts
// them.
var consentHidden = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// docs/credentials.md "Authorize", step 5: when the consent form carries
// `scopes` and they are no longer what the token would get, approving is a
// 409 page and no code. A page that showed no scope at all carries an
// empty `scopes`, which is still what was shown.
func TestAuthorizeApprovesOnlyTheScopesShown(t *testing.T) {
	f := newFixture(t)
	const redirectURL = "https://k.example/cb"
	slug := "consent-" + strings.ToLower(ids.New()[24:32])
	manifestOf := func(version string, scopes []string) string {
		man, err := json.Marshal(map[string]any{
			"schemaVersion": 1, "slug": slug, "version": version,
			"displayName": map[string]any{"en": "Scoped"}, "description": map[string]any{"en": "Asks."},
			"developer":        map[string]any{"name": "Dev", "url": "https://example.com"},
			"privacyPolicyUrl": "https://example.com/privacy",
			"bot":              map[string]any{"displayName": map[string]any{"en": "Bot"}, "scopes": scopes},
			"oauth":            map[string]any{"redirectUrls": []string{redirectURL}},
			"distribution":     "private",
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(man)
	}
	claim := call[*kitpb.SlugReply](t, f.s, actors.KindSlug, slug, &kitpb.ClaimSlug{KitId: ids.New(), WorkspaceId: f.ws})
	upload := func(version string, scopes []string) {
		call[*kitpb.VersionReply](t, f.s, actors.KindKit, claim.KitId, &kitpb.UploadVersion{
			KitId: claim.KitId, WorkspaceId: f.ws, VersionId: ids.New(), Manifest: manifestOf(version, scopes), Publish: true,
		})
		call[*kitpb.InstallationReply](t, f.s, actors.KindWorkspace, f.ws, &kitpb.Install{KitId: claim.KitId})
	}
	query := url.Values{"workspace": {f.ws}, "kit": {slug}, "token_type": {"bot"}, "redirect_uri": {redirectURL}, "state": {"st"}}
	// consentForm is the consent page's form as a browser posts it: its
	// fields in the page's order, then the button.
	consentForm := func(t *testing.T) string {
		p := f.do((*Server).AuthorizePage, "GET", "/app/kits/authorize?"+query.Encode(), f.adminCookie, nil)
		if p.status != 200 || !strings.Contains(p.body, `name="scopes" value=""`) {
			t.Fatalf("consent page: status %d, want one that shows no scope:\n%s", p.status, p.body)
		}
		var fields []string
		for _, m := range consentHidden.FindAllStringSubmatch(p.body, -1) {
			fields = append(fields, url.QueryEscape(html.UnescapeString(m[1]))+"="+url.QueryEscape(html.UnescapeString(m[2])))
		}
		return strings.Join(append(fields, "decision=approve"), "&")
	}
	upload("1.0.0", []string{})
	for _, tc := range []struct {
		name   string
		then   []string // the bot scopes of the version installed after the page
		status int
	}{
		{"a page that showed no scope approves no scope", nil, 302},
		{"a page that showed no scope does not approve scopes added since", []string{"messages:read"}, 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := consentForm(t)
			if tc.then != nil {
				upload("1.1.0", tc.then)
			}
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetRequestURI("/app/kits/authorize")
			ctx.Request.Header.SetCookie(SessionCookie, f.adminCookie)
			ctx.Request.Header.SetContentType("application/x-www-form-urlencoded")
			ctx.Request.SetBodyString(form)
			f.s.Authorize(&ctx)
			p := struct {
				status int
				body   string
			}{ctx.Response.StatusCode(), string(ctx.Response.Body())}
			loc := string(ctx.Response.Header.Peek("Location"))
			if p.status != tc.status || (tc.status != 302) != (loc == "") {
				t.Fatalf("status %d, Location %q, want %d:\n%s", p.status, loc, tc.status, p.body)
			}
		})
	}
}
