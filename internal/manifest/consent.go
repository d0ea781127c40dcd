package manifest

import (
	"slices"
	"strings"

	"github.com/kitd/kitd/kitclient/dev"
)

// The consent summary and diff are answers of the developer API: their
// types are the public client's (kitclient/dev, which imports nothing of
// kitd), so the shape a client decodes is written once.

// SummaryOptions carry what only the server knows about a consent summary.
type SummaryOptions struct {
	Available        bool   // the viewer's workspace may install this version
	Installed        bool   // the Kit is installed in the viewer's workspace
	Official         bool   // the Kit is published by the operator
	OwnedByWorkspace *bool  // nil: left out of the summary
	Language         string // preferred language code of the viewer; "": en
}

// ConsentSummary is what a member is shown before consenting (docs/api.md
// "Consent summary and diff"). Texts are in one language, picked by
// SummaryOptions.Language (see pickLanguage). Lists are never nil; the
// icon URL and external auth are null when the Kit has none, and
// userScopes is left out when it asks for none.
type ConsentSummary = dev.ConsentSummary

// ExternalAuthSummary is the external auth part of a ConsentSummary.
type ExternalAuthSummary = dev.ExternalAuth

// ToolSummary is one tool of a ConsentSummary.
type ToolSummary = dev.ToolSummary

// ToolAccess is what a tool may do: the part of a tool ConsentDiff compares.
type ToolAccess = dev.ToolAccess

// ConsentSummary returns the consent summary of the manifest. Scopes, tools
// and categories are in the order written.
func (m *Manifest) ConsentSummary(opts SummaryOptions) ConsentSummary {
	lang := opts.Language
	s := ConsentSummary{
		Slug:                     m.Slug,
		Version:                  m.Version.String(),
		Official:                 opts.Official,
		DisplayName:              pickLanguage(m.DisplayName, lang),
		Description:              pickLanguage(m.Description, lang),
		DeveloperName:            m.Developer.Name,
		PrivacyPolicyURL:         m.PrivacyPolicyURL,
		Categories:               nonNil(m.Categories),
		Sample:                   m.Sample,
		BotScopes:                nonNil(m.BotScopes()),
		Tools:                    make([]ToolSummary, len(m.Tools)),
		RequestedModelDataPolicy: m.modelDataPolicy(),
		ConsentHash:              m.ConsentHash(),
		Available:                opts.Available,
		Installed:                opts.Installed,
		OwnedByWorkspace:         opts.OwnedByWorkspace,
	}
	if m.IconURL != "" {
		icon := m.IconURL
		s.IconURL = &icon
	}
	if a := m.ExternalAuth; a != nil {
		s.ExternalAuth = &ExternalAuthSummary{
			DisplayName:    pickLanguage(a.DisplayName, lang),
			RequiredScopes: nonNil(a.RequiredScopes),
			OptionalScopes: nonNil(a.OptionalScopes),
		}
	}
	for i, t := range m.Tools {
		s.Tools[i] = ToolSummary{
			Name:        t.Name,
			DisplayName: pickLanguage(t.DisplayName, lang),
			Description: pickLanguage(t.Description, lang),
			ToolAccess:  t.access(),
		}
	}
	if us := m.UserScopes(); len(us) > 0 {
		s.UserScopes = slices.Clone(us)
	}
	return s
}

// pickLanguage returns the text for language code lang: lang itself, else
// its base language (pt for pt-BR), else any regional variant of that base
// (the smallest code), else en, else the text with the smallest code.
func pickLanguage(t map[string]string, lang string) string {
	if lang != "" {
		if s, ok := t[lang]; ok {
			return s
		}
		base, _, _ := strings.Cut(lang, "-")
		if s, ok := t[base]; ok {
			return s
		}
		best := ""
		for k := range t {
			if strings.HasPrefix(k, base+"-") && (best == "" || k < best) {
				best = k
			}
		}
		if best != "" {
			return t[best]
		}
	}
	return pickLang(t)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

func (t Tool) access() ToolAccess {
	return ToolAccess{Access: t.Access, DataClass: t.DataClass, Audience: t.Audience}
}

// ConsentDiff is what a new version asks for beyond, or no longer asks for
// compared with, an older one (docs/manifest.md "Consent summary", "Consent diff"). Lists
// are sorted and never nil. ExternalAuth is one of the Auth* changes,
// ModelDataPolicy is null unless the policy changed, and Wider is true
// when the new version asks for anything more.
type ConsentDiff = dev.ConsentDiff

// ToolGrant is an added tool.
type ToolGrant = dev.ToolGrant

// ToolChange is a tool whose access, data class or audience changed. Wider
// is true when any of the three widened (even if another narrowed).
type ToolChange = dev.ToolChange

// PolicyChange is a changed model data policy.
type PolicyChange = dev.PolicyChange

// External auth changes (ConsentDiff.ExternalAuth).
const (
	AuthUnchanged = "unchanged"
	AuthAdded     = "added"
	AuthRemoved   = "removed"
	AuthWidened   = "widened"
	AuthNarrowed  = "narrowed"
)

// Diff compares what members consent to in from (the latest published
// version) and to (the new one). A nil manifest counts as one that asks for
// nothing, so Diff(nil, m) lists everything m asks for. Wider is true when
// to adds a bot or user scope, a tool, an event or a command; widens a tool
// (access read < write, data class aggregate < standard < personal <
// sensitive, audience private < any); adds or widens external auth; or
// changes the model data policy from none to answer.
func Diff(from, to *Manifest) ConsentDiff {
	if from == nil {
		from = &Manifest{}
	}
	if to == nil {
		to = &Manifest{}
	}
	d := ConsentDiff{}
	d.AddedBotScopes, d.RemovedBotScopes = setDiff(from.BotScopes(), to.BotScopes())
	d.AddedUserScopes, d.RemovedUserScopes = setDiff(from.UserScopes(), to.UserScopes())
	d.AddedEvents, d.RemovedEvents = setDiff(from.Events, to.Events)
	d.AddedCommands, d.RemovedCommands = setDiff(from.commandNames(), to.commandNames())

	old := make(map[string]Tool, len(from.Tools))
	for _, t := range from.Tools {
		old[t.Name] = t
	}
	d.AddedTools, d.ChangedTools = []ToolGrant{}, []ToolChange{}
	current := make(map[string]bool, len(to.Tools))
	for _, t := range sortedTools(to.Tools) {
		current[t.Name] = true
		o, had := old[t.Name]
		switch {
		case !had:
			d.AddedTools = append(d.AddedTools, ToolGrant{Name: t.Name, ToolAccess: t.access()})
		case o.access() != t.access():
			d.ChangedTools = append(d.ChangedTools, ToolChange{Name: t.Name, From: o.access(), To: t.access(), Wider: widens(o.access(), t.access())})
		}
	}
	d.RemovedTools = []string{}
	for _, t := range sortedTools(from.Tools) {
		if !current[t.Name] {
			d.RemovedTools = append(d.RemovedTools, t.Name)
		}
	}

	d.ExternalAuth = externalAuthChange(from.ExternalAuth, to.ExternalAuth)
	if f, t := from.modelDataPolicy(), to.modelDataPolicy(); f != t {
		d.ModelDataPolicy = &PolicyChange{From: f, To: t}
	}

	d.Wider = len(d.AddedBotScopes) > 0 || len(d.AddedUserScopes) > 0 ||
		len(d.AddedTools) > 0 || len(d.AddedEvents) > 0 || len(d.AddedCommands) > 0 ||
		slices.ContainsFunc(d.ChangedTools, func(c ToolChange) bool { return c.Wider }) ||
		d.ExternalAuth == AuthAdded || d.ExternalAuth == AuthWidened ||
		d.ModelDataPolicy != nil && rank(modelDataPolicies, d.ModelDataPolicy.To) > rank(modelDataPolicies, d.ModelDataPolicy.From)
	return d
}

// setDiff returns the sorted elements only in to (added) and only in from
// (removed). Both are never nil.
func setDiff(from, to []string) (added, removed []string) {
	added, removed = []string{}, []string{}
	for _, s := range to {
		if !slices.Contains(from, s) {
			added = append(added, s)
		}
	}
	for _, s := range from {
		if !slices.Contains(to, s) {
			removed = append(removed, s)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return slices.Compact(added), slices.Compact(removed)
}

func sortedTools(t []Tool) []Tool {
	t = slices.Clone(t)
	slices.SortFunc(t, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return t
}

// rank is the index of v in an order of narrowest first, -1 when unknown.
func rank(order []string, v string) int { return slices.Index(order, v) }

// widens reports whether any of access, data class or audience grew.
func widens(from, to ToolAccess) bool {
	return rank(toolAccess, to.Access) > rank(toolAccess, from.Access) ||
		rank(toolDataClass, to.DataClass) > rank(toolDataClass, from.DataClass) ||
		rank(toolAudience, to.Audience) > rank(toolAudience, from.Audience)
}

// externalAuthChange classifies a change of external auth. Both present:
// widened when to asks for a scope from did not ask for at all, makes an
// optional scope required, or names another provider (authorize or token
// URL); else narrowed when a scope was dropped or made optional; else
// unchanged (a new display name alone changes nothing granted).
func externalAuthChange(from, to *ExternalAuth) string {
	switch {
	case from == nil && to == nil:
		return AuthUnchanged
	case from == nil:
		return AuthAdded
	case to == nil:
		return AuthRemoved
	}
	if from.AuthorizeURL != to.AuthorizeURL || from.TokenURL != to.TokenURL {
		return AuthWidened
	}
	fromAll := append(slices.Clone(from.RequiredScopes), from.OptionalScopes...)
	toAll := append(slices.Clone(to.RequiredScopes), to.OptionalScopes...)
	addedAny, removedAny := setDiff(fromAll, toAll)
	addedReq, removedReq := setDiff(from.RequiredScopes, to.RequiredScopes)
	switch {
	case len(addedAny) > 0 || len(addedReq) > 0:
		return AuthWidened
	case len(removedAny) > 0 || len(removedReq) > 0:
		return AuthNarrowed
	}
	return AuthUnchanged
}
