// Package dev holds the wire types of kitd's developer API ({base_url}/dev,
// docs/api.md "Developer API", docs/decisions.md "Developer API"): the
// request and answer shapes the `kit` CLI and other tools decode. It is
// kitclient's sibling, apart because a Kit's backend never calls the
// developer API; like kitclient it imports nothing of kitd, and nullable
// fields are pointers so that null stays null when a value is printed
// back as JSON.
package dev

// Me is the answer of GET /dev/me.
type Me struct {
	WorkspaceID string   `json:"workspaceId"`
	UserID      string   `json:"userId"`
	Sandbox     bool     `json:"sandbox"`
	Token       DevToken `json:"token"`
}

// DevToken describes the developer token that made the call.
type DevToken struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	CreatedAt  string  `json:"createdAt"`
	ExpiresAt  string  `json:"expiresAt"`
	LastUsedAt *string `json:"lastUsedAt"`
	RevokedAt  *string `json:"revokedAt"`
}

// Kit is a Kit (docs/api.md "Kit").
type Kit struct {
	KitID                  string  `json:"kitId"`
	Slug                   string  `json:"slug"`
	DisplayName            string  `json:"displayName"`
	Distribution           string  `json:"distribution"`
	State                  string  `json:"state"`
	CreatedAt              string  `json:"createdAt"`
	LatestVersion          *string `json:"latestVersion"`
	LatestPublishedVersion *string `json:"latestPublishedVersion"`
	InstalledHere          bool    `json:"installedHere"`
}

// KitList is the answer of GET /dev/kits.
type KitList struct {
	Kits []Kit `json:"kits"`
}

// Version is a version of a Kit (docs/api.md "Version").
type Version struct {
	ID           string  `json:"id"`
	Version      string  `json:"version"`
	Published    bool    `json:"published"`
	PublishedAt  *string `json:"publishedAt"`
	CreatedAt    string  `json:"createdAt"`
	ConsentHash  string  `json:"consentHash"`
	ManifestHash string  `json:"manifestHash"`
	Distribution string  `json:"distribution"`
}

// VersionResult is the answer of an upload or a publish.
type VersionResult struct {
	KitID          string  `json:"kitId"`
	Created        bool    `json:"created"`
	Version        Version `json:"version"`
	InstallationID *string `json:"installationId"`
}

// Domain is a domain of a Kit (docs/api.md "Domain").
type Domain struct {
	Domain     string      `json:"domain"`
	Method     string      `json:"method"`
	Verified   bool        `json:"verified"`
	VerifiedAt *string     `json:"verifiedAt"`
	Challenge  string      `json:"challenge"`
	Proof      DomainProof `json:"proof"`
}

// DomainProof is what the developer publishes for each method.
type DomainProof struct {
	DNS struct {
		Type  string `json:"type"`
		Host  string `json:"host"`
		Value string `json:"value"`
	} `json:"dns"`
	WellKnown struct {
		URL  string `json:"url"`
		Body struct {
			KitID string `json:"kitId"`
			Token string `json:"token"`
		} `json:"body"`
	} `json:"wellKnown"`
}

// DomainResult is the answer of adding or verifying a domain.
type DomainResult struct {
	Domain Domain `json:"domain"`
}

// KitDetail is the `detail` of GET /dev/kits/{kitId}.
type KitDetail struct {
	Kit             Kit         `json:"kit"`
	Versions        []Version   `json:"versions"`
	Domains         []Domain    `json:"domains"`
	Credentials     Credentials `json:"credentials"`
	InstallLink     InstallLink `json:"installLink"`
	EndpointHosts   []string    `json:"endpointHosts"`
	UnverifiedHosts []string    `json:"unverifiedHosts"`
}

// KitDetailResponse is the answer of GET /dev/kits/{kitId}.
type KitDetailResponse struct {
	Detail KitDetail `json:"detail"`
}

// Credentials is the metadata of a Kit's secrets (never the secrets).
type Credentials struct {
	ClientSecret *struct {
		CreatedAt string `json:"createdAt"`
	} `json:"clientSecret,omitempty"`
	SigningSecret *struct {
		Generation        int     `json:"generation"`
		CreatedAt         string  `json:"createdAt"`
		PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
	} `json:"signingSecret,omitempty"`
}

// InstallLink says whether the Kit has an install link.
type InstallLink struct {
	Active    bool    `json:"active"`
	CreatedAt *string `json:"createdAt"`
}

// InstallLinkResult is the answer of the install-link routes; URL is set
// only when the link was just made (its secret is shown once).
type InstallLinkResult struct {
	InstallLink struct {
		Active    bool    `json:"active"`
		CreatedAt *string `json:"createdAt"`
		URL       string  `json:"url,omitempty"`
	} `json:"installLink"`
}

// LogEntry is a line of a Kit's developer log (docs/api.md "Developer log entry").
type LogEntry struct {
	ID             string  `json:"id"`
	At             string  `json:"at"`
	Source         string  `json:"source"`
	Level          string  `json:"level"`
	Event          string  `json:"event"`
	InstallationID *string `json:"installationId"`
	Status         *string `json:"status"`
	ErrorCode      *string `json:"errorCode"`
	DurationMs     *int64  `json:"durationMs"`
	HTTPStatus     *int    `json:"httpStatus"`
	Attempt        *int    `json:"attempt"`
}

// LogPage is the answer of GET /dev/kits/{kitId}/logs: newest first.
type LogPage struct {
	Entries    []LogEntry `json:"entries"`
	NextCursor *string    `json:"nextCursor"`
	Sources    []string   `json:"sources"`
}

// Problem is a validation problem or warning: a path and a reason, never the
// submitted value.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Validation is the answer of POST /dev/kits/validate.
type Validation struct {
	Valid           bool            `json:"valid"`
	Problems        []Problem       `json:"problems"`
	Warnings        []Problem       `json:"warnings"`
	Consent         *ConsentSummary `json:"consent"`
	Hosts           []string        `json:"hosts"`
	UnverifiedHosts []string        `json:"unverifiedHosts"`
	Diff            *ConsentDiff    `json:"diff"`
	ExistingKitID   *string         `json:"existingKitId"`
}

// ConsentSummary is what an installer is asked to consent to.
type ConsentSummary struct {
	Slug                     string        `json:"slug"`
	Version                  string        `json:"version"`
	Official                 bool          `json:"official"`
	DisplayName              string        `json:"displayName"`
	Description              string        `json:"description"`
	DeveloperName            string        `json:"developerName"`
	PrivacyPolicyURL         string        `json:"privacyPolicyUrl"`
	IconURL                  *string       `json:"iconUrl"`
	Categories               []string      `json:"categories"`
	Sample                   bool          `json:"sample"`
	ExternalAuth             *ExternalAuth `json:"externalAuth"`
	BotScopes                []string      `json:"botScopes"`
	Tools                    []ToolSummary `json:"tools"`
	RequestedModelDataPolicy string        `json:"requestedModelDataPolicy"`
	ConsentHash              string        `json:"consentHash"`
	Available                bool          `json:"available"`
	Installed                bool          `json:"installed"`
	OwnedByWorkspace         *bool         `json:"ownedByWorkspace,omitempty"`
	UserScopes               []string      `json:"userScopes,omitempty"`
}

// ExternalAuth is the third-party account of a consent summary.
type ExternalAuth struct {
	DisplayName    string   `json:"displayName"`
	RequiredScopes []string `json:"requiredScopes"`
	OptionalScopes []string `json:"optionalScopes"`
}

// ToolSummary is one tool of a consent summary.
type ToolSummary struct {
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
	ToolAccess
}

// ToolAccess is what a tool may do and to which data.
type ToolAccess struct {
	Access    string `json:"access"`
	DataClass string `json:"dataClass"`
	Audience  string `json:"audience"`
}

// ToolGrant is an added tool of a consent diff.
type ToolGrant struct {
	Name string `json:"name"`
	ToolAccess
}

// ToolChange is a tool whose access, data class or audience changed.
type ToolChange struct {
	Name  string     `json:"name"`
	From  ToolAccess `json:"from"`
	To    ToolAccess `json:"to"`
	Wider bool       `json:"wider"`
}

// PolicyChange is a changed model data policy.
type PolicyChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ConsentDiff is the consent difference to the latest published version.
type ConsentDiff struct {
	AddedBotScopes    []string      `json:"addedBotScopes"`
	RemovedBotScopes  []string      `json:"removedBotScopes"`
	AddedUserScopes   []string      `json:"addedUserScopes"`
	RemovedUserScopes []string      `json:"removedUserScopes"`
	AddedTools        []ToolGrant   `json:"addedTools"`
	RemovedTools      []string      `json:"removedTools"`
	ChangedTools      []ToolChange  `json:"changedTools"`
	AddedEvents       []string      `json:"addedEvents"`
	RemovedEvents     []string      `json:"removedEvents"`
	AddedCommands     []string      `json:"addedCommands"`
	RemovedCommands   []string      `json:"removedCommands"`
	ExternalAuth      string        `json:"externalAuth"`
	ModelDataPolicy   *PolicyChange `json:"modelDataPolicy"`
	Wider             bool          `json:"wider"`
}

// DevInstall is the answer of POST /dev/sandbox/dev-install.
type DevInstall struct {
	KitID          string   `json:"kitId"`
	Slug           string   `json:"slug"`
	Version        string   `json:"version"`
	InstallationID string   `json:"installationId"`
	Endpoints      []string `json:"endpoints"`
	SigningSecret  *struct {
		SigningSecret     string  `json:"signingSecret"`
		Generation        int     `json:"generation"`
		PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
	} `json:"signingSecret,omitempty"`
}

// ValidateRequest is the body of POST /dev/kits/validate.
type ValidateRequest struct {
	Manifest string `json:"manifest"` // the manifest JSON document, 2-65536 characters
}

// UploadRequest is the body of POST /dev/kits/versions.
type UploadRequest struct {
	Manifest string `json:"manifest"`
	Publish  bool   `json:"publish"`
}

// DevInstallRequest is the body of POST /dev/sandbox/dev-install.
type DevInstallRequest struct {
	Manifest string `json:"manifest"`
	URL      string `json:"url"` // the tunnel whose origin replaces every endpoint's
}

// AddDomainRequest is the body of POST /dev/kits/{kitId}/domains.
type AddDomainRequest struct {
	Domain string `json:"domain"`
	Method string `json:"method,omitempty"` // dns (the default) or well_known
}

// Delivery is one event sent or to be sent to an installation's events
// endpoint (GET /dev/installations/{installationId}/deliveries).
type Delivery struct {
	EventID        string  `json:"eventId"`
	Sequence       uint64  `json:"sequence"`
	Type           string  `json:"type"`
	ConversationID *string `json:"conversationId"`
	OccurredAt     string  `json:"occurredAt"`
	State          string  `json:"state"` // queued, in_flight, retrying, succeeded, dead
	Attempts       int     `json:"attempts"`
	LastHTTPStatus *int    `json:"lastHttpStatus"`
	LastErrorCode  *string `json:"lastErrorCode"`
	NextAttemptAt  *string `json:"nextAttemptAt"`
	FinishedAt     *string `json:"finishedAt"`
	Redelivery     bool    `json:"redelivery"`
	Test           bool    `json:"test"`
}

// DeliveryEndpoint is the health of an installation's events endpoint.
type DeliveryEndpoint struct {
	State        string  `json:"state"` // healthy, failing, paused
	FailingSince *string `json:"failingSince"`
	PausedAt     *string `json:"pausedAt"`
}

// DeliveryPage is the answer of GET
// /dev/installations/{installationId}/deliveries: highest sequence first.
type DeliveryPage struct {
	Deliveries []Delivery       `json:"deliveries"`
	NextCursor *string          `json:"nextCursor"`
	Endpoint   DeliveryEndpoint `json:"endpoint"`
	// WaitingInOutbox: more events wait past what the installation keeps
	// queued, without a sequence yet; they are listed once taken.
	WaitingInOutbox bool `json:"waitingInOutbox"`
	// KitState is the installed Kit's state, active or suspended: while
	// the operator has it suspended its events wait, not attempted.
	KitState string `json:"kitState"`
}

// Redelivered is the answer of POST
// /dev/installations/{installationId}/deliveries/redeliver.
type Redelivered struct {
	Redelivered int      `json:"redelivered"`
	Sequences   []uint64 `json:"sequences"`
	// More: dead letters since the time remain past what the queue had
	// room for; ask again once these went.
	More bool `json:"more"`
}

// TestEvent is the answer of POST /dev/kits/{kitId}/test-events.
type TestEvent struct {
	EventID        string `json:"eventId"`
	Sequence       uint64 `json:"sequence"`
	Type           string `json:"type"`
	InstallationID string `json:"installationId"`
}
