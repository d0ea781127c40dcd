package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/kitd/kitd/kitclient/dev"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// The human output of every command. Formatters only write: they take the
// decoded answer and never call the API, so they are tested on their own.
// Every value that came from the server goes through clean before it is
// printed: a control character in a name must not break a table or drive
// the terminal.

// clean replaces control characters (tabs and newlines included) with
// spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// writeJSON prints v indented, for scripts (--json).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table aligns tab-separated cells; a line without tabs ends a table. Lines
// lose their trailing padding (a last cell that is empty).
type table struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{out: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 8, 2, ' ', 0)
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the aligned lines.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	t.buf.Reset()
	_, err := io.WriteString(t.out, out.String())
	return err
}

// row writes one table line of cleaned cells.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = clean(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + one + "s"
}

// formatValidation prints a validation: "valid" or the problems, then the
// warnings, the endpoint hosts and what an installer is asked to consent to.
func formatValidation(w io.Writer, v *dev.Validation) error {
	tw := newTable(w)
	switch {
	case !v.Valid:
		row(tw, "invalid: "+plural(len(v.Problems), "problem"))
	case v.Consent == nil:
		row(tw, "valid")
	case v.ExistingKitID != nil:
		row(tw, fmt.Sprintf("valid: %s %s (a new version of Kit %s)", v.Consent.Slug, v.Consent.Version, *v.ExistingKitID))
	default:
		row(tw, fmt.Sprintf("valid: %s %s (a new Kit)", v.Consent.Slug, v.Consent.Version))
	}
	problemTable(tw, "Problems", v.Problems)
	problemTable(tw, "Warnings", v.Warnings)
	if len(v.Hosts) > 0 {
		row(tw)
		row(tw, "Endpoint hosts: "+listOrNone(v.Hosts))
		row(tw, "Unverified hosts: "+listOrNone(v.UnverifiedHosts))
	}
	switch {
	case v.Diff != nil:
		row(tw)
		subTable(tw, diffRows(v.Diff), "Consent: no changes since the latest published version",
			"Consent changes since the latest published version:", "CHANGE", "KIND", "NAME", "DETAIL")
		if v.Diff.Wider {
			row(tw, "wider: yes (installers will be asked to consent again)")
		} else {
			row(tw, "wider: no (installers are not asked to consent again)")
		}
	case v.Valid && v.Consent != nil:
		row(tw)
		subTable(tw, consentRows(v.Consent), "Consent: nothing published yet; installers are asked for nothing",
			"Consent (nothing published yet; installers are asked for all of it):", "KIND", "NAME", "DETAIL")
	}
	return tw.Flush()
}

// subTable prints rows under title and the header, indented; without rows
// it prints the line none instead.
func subTable(w io.Writer, rows [][]string, none, title string, header ...string) {
	if len(rows) == 0 {
		row(w, none)
		return
	}
	row(w, title)
	for _, r := range append([][]string{header}, rows...) {
		row(w, append([]string{"  " + r[0]}, r[1:]...)...)
	}
}

func problemTable(w io.Writer, title string, ps []dev.Problem) {
	if len(ps) == 0 {
		return
	}
	row(w)
	row(w, title+":")
	row(w, "  PATH", "MESSAGE")
	for _, p := range ps {
		path := p.Path
		if path == "" {
			path = "(manifest)"
		}
		row(w, "  "+path, p.Message)
	}
}

func toolAccess(a dev.ToolAccess) string {
	return fmt.Sprintf("access=%s dataClass=%s audience=%s", a.Access, a.DataClass, a.Audience)
}

// toolChange shows every attribute, with an arrow on those that changed.
func toolChange(c dev.ToolChange) string {
	attr := func(name, from, to string) string {
		if from == to {
			return name + "=" + to
		}
		return name + "=" + from + "->" + to
	}
	s := attr("access", c.From.Access, c.To.Access) + " " +
		attr("dataClass", c.From.DataClass, c.To.DataClass) + " " +
		attr("audience", c.From.Audience, c.To.Audience)
	if c.Wider {
		s += " (wider)"
	}
	return s
}

// diffRows is the consent diff as table rows: change, kind, name, detail.
func diffRows(d *dev.ConsentDiff) [][]string {
	var rows [][]string
	names := func(change, kind string, items []string) {
		for _, n := range items {
			rows = append(rows, []string{change, kind, n, ""})
		}
	}
	names("added", "bot scope", d.AddedBotScopes)
	names("removed", "bot scope", d.RemovedBotScopes)
	names("added", "user scope", d.AddedUserScopes)
	names("removed", "user scope", d.RemovedUserScopes)
	for _, t := range d.AddedTools {
		rows = append(rows, []string{"added", "tool", t.Name, toolAccess(t.ToolAccess)})
	}
	names("removed", "tool", d.RemovedTools)
	for _, t := range d.ChangedTools {
		rows = append(rows, []string{"changed", "tool", t.Name, toolChange(t)})
	}
	names("added", "event", d.AddedEvents)
	names("removed", "event", d.RemovedEvents)
	names("added", "command", d.AddedCommands)
	names("removed", "command", d.RemovedCommands)
	if d.ExternalAuth != "" && d.ExternalAuth != "unchanged" {
		rows = append(rows, []string{d.ExternalAuth, "external auth", "", ""})
	}
	if p := d.ModelDataPolicy; p != nil {
		rows = append(rows, []string{"changed", "model data policy", "", p.From + " -> " + p.To})
	}
	return rows
}

// consentRows is what a first version asks for: kind, name, detail.
func consentRows(c *dev.ConsentSummary) [][]string {
	var rows [][]string
	for _, s := range c.BotScopes {
		rows = append(rows, []string{"bot scope", s, ""})
	}
	for _, s := range c.UserScopes {
		rows = append(rows, []string{"user scope", s, ""})
	}
	for _, t := range c.Tools {
		rows = append(rows, []string{"tool", t.Name, toolAccess(t.ToolAccess)})
	}
	if a := c.ExternalAuth; a != nil {
		rows = append(rows, []string{"external auth", a.DisplayName,
			"required=" + listOrNone(a.RequiredScopes) + " optional=" + listOrNone(a.OptionalScopes)})
	}
	if c.RequestedModelDataPolicy != "" && c.RequestedModelDataPolicy != "none" {
		rows = append(rows, []string{"model data policy", "", c.RequestedModelDataPolicy})
	}
	return rows
}

// formatVersionResult prints the answer of an upload or a publish.
func formatVersionResult(w io.Writer, action string, r *dev.VersionResult) error {
	tw := newTable(w)
	v := r.Version
	switch {
	case action == "publish":
		row(tw, "published version "+v.Version)
	case r.Created && v.Published:
		row(tw, "uploaded and published version "+v.Version)
	case r.Created:
		row(tw, "uploaded version "+v.Version)
	case v.Published:
		// An upload with --publish of a registered draft publishes it; the
		// answer (created false) does not say whether it was a draft.
		row(tw, "version "+v.Version+" was already uploaded with this manifest; it is published")
	default:
		row(tw, "version "+v.Version+" was already uploaded with this manifest: nothing changed")
	}
	row(tw, "kit", r.KitID)
	row(tw, "version", v.Version)
	if v.Published {
		row(tw, "state", "published "+orDash(v.PublishedAt))
	} else {
		row(tw, "state", "draft (publish it with: kit versions publish "+r.KitID+" "+v.Version+")")
	}
	row(tw, "distribution", v.Distribution)
	row(tw, "consent hash", v.ConsentHash)
	if r.InstallationID != nil {
		row(tw, "installation", *r.InstallationID)
	}
	return tw.Flush()
}

// formatKits prints the workspace's Kits, one per line.
func formatKits(w io.Writer, kits []dev.Kit) error {
	if len(kits) == 0 {
		_, err := fmt.Fprintln(w, "no Kits yet: kit versions upload FILE creates one")
		return err
	}
	tw := newTable(w)
	row(tw, "ID", "SLUG", "NAME", "DISTRIBUTION", "STATE", "LATEST", "PUBLISHED", "INSTALLED")
	for _, k := range kits {
		row(tw, k.KitID, k.Slug, k.DisplayName, k.Distribution, k.State, orDash(k.LatestVersion), orDash(k.LatestPublishedVersion), yesNo(k.InstalledHere))
	}
	return tw.Flush()
}

// formatKitDetail prints a Kit, its credentials' metadata, its versions and
// its domains.
func formatKitDetail(w io.Writer, d *dev.KitDetail) error {
	tw := newTable(w)
	k := d.Kit
	row(tw, k.DisplayName+" ("+k.Slug+")")
	row(tw, "id", k.KitID)
	row(tw, "distribution", k.Distribution)
	row(tw, "state", k.State)
	row(tw, "created", k.CreatedAt)
	row(tw, "latest version", orDash(k.LatestVersion))
	row(tw, "latest published", orDash(k.LatestPublishedVersion))
	row(tw, "installed here", yesNo(k.InstalledHere))
	if s := d.Credentials.ClientSecret; s != nil {
		row(tw, "client secret", "created "+s.CreatedAt)
	} else {
		row(tw, "client secret", "none")
	}
	if s := d.Credentials.SigningSecret; s != nil {
		desc := fmt.Sprintf("generation %d, created %s", s.Generation, s.CreatedAt)
		if s.PreviousExpiresAt != nil {
			desc += ", previous one works until " + *s.PreviousExpiresAt
		}
		row(tw, "signing secret", desc)
	} else {
		row(tw, "signing secret", "none")
	}
	if d.InstallLink.Active {
		row(tw, "install link", "active since "+orDash(d.InstallLink.CreatedAt))
	} else {
		row(tw, "install link", "none")
	}
	row(tw, "endpoint hosts", listOrNone(d.EndpointHosts))
	row(tw, "unverified hosts", listOrNone(d.UnverifiedHosts))

	row(tw)
	row(tw, "Versions:")
	row(tw, "  VERSION", "STATE", "DISTRIBUTION", "CREATED", "CONSENT HASH")
	for _, v := range d.Versions {
		state := "draft"
		if v.Published {
			state = "published " + orDash(v.PublishedAt)
		}
		hash := v.ConsentHash
		if len(hash) > 12 {
			hash = hash[:12] // enough to tell versions apart, as git's short hashes
		}
		row(tw, "  "+v.Version, state, v.Distribution, v.CreatedAt, hash)
	}
	row(tw)
	if len(d.Domains) == 0 {
		row(tw, "Domains: none")
	} else {
		row(tw, "Domains:")
		row(tw, "  DOMAIN", "METHOD", "VERIFIED")
		for _, dm := range d.Domains {
			verified := "no"
			if dm.Verified {
				verified = "yes " + orDash(dm.VerifiedAt)
			}
			row(tw, "  "+dm.Domain, dm.Method, verified)
		}
	}
	return tw.Flush()
}

// logTime is the time of a log entry in one width (UTC, milliseconds), so
// that followed lines stay aligned; a time it cannot read is shown as is.
func logTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// formatLogLine prints one log entry on one line. It uses fixed widths
// instead of a table because --follow prints entries as they come.
func formatLogLine(w io.Writer, e *dev.LogEntry) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-9s  %-5s  %s", logTime(e.At), e.Source, e.Level, e.Event)
	if e.Status != nil {
		b.WriteString(" status=" + *e.Status)
	}
	if e.ErrorCode != nil {
		b.WriteString(" error=" + *e.ErrorCode)
	}
	if e.HTTPStatus != nil {
		fmt.Fprintf(&b, " http=%d", *e.HTTPStatus)
	}
	if e.Attempt != nil {
		fmt.Fprintf(&b, " attempt=%d", *e.Attempt)
	}
	if e.DurationMs != nil {
		fmt.Fprintf(&b, " duration=%dms", *e.DurationMs)
	}
	if e.InstallationID != nil {
		b.WriteString(" installation=" + *e.InstallationID)
	}
	_, err := fmt.Fprintln(w, clean(b.String()))
	return err
}

// formatLogPage prints a page of the log oldest first (the API sends newest
// first), as --follow does, and how to get the older entries.
func formatLogPage(w io.Writer, kitArg string, q LogQuery, p *dev.LogPage) error {
	if len(p.Entries) == 0 {
		_, err := fmt.Fprintln(w, "no log entries")
		return err
	}
	for _, e := range slices.Backward(p.Entries) {
		if err := formatLogLine(w, &e); err != nil {
			return err
		}
	}
	if p.NextCursor != nil {
		// The cursor holds a position only: the next page is of the
		// same filters only when they are given again.
		var filters string
		if q.Source != "" {
			filters += " --source " + q.Source
		}
		if q.Level != "" {
			filters += " --level " + q.Level
		}
		if q.Limit > 0 {
			filters += " --limit " + strconv.Itoa(q.Limit)
		}
		_, err := fmt.Fprintf(w, "older entries: kit logs %s%s --cursor %s\n", clean(kitArg), clean(filters), clean(*p.NextCursor))
		return err
	}
	return nil
}

// formatDomain prints a domain and, until it is verified, the proof of its
// method to publish and the command that checks it.
func formatDomain(w io.Writer, kitArg string, d *dev.Domain, added bool) error {
	tw := newTable(w)
	switch {
	case d.Verified:
		row(tw, fmt.Sprintf("%s is verified (%s, method %s)", d.Domain, orDash(d.VerifiedAt), d.Method))
		return tw.Flush()
	case added:
		row(tw, fmt.Sprintf("added %s (method %s); it is not verified yet", d.Domain, d.Method))
	default:
		row(tw, fmt.Sprintf("%s (method %s) is not verified yet", d.Domain, d.Method))
	}
	verify := "kit domains verify " + kitArg + " " + d.Domain
	if d.Method == "well_known" {
		body, err := json.Marshal(d.Proof.WellKnown.Body)
		if err != nil {
			return fmt.Errorf("format the well-known body: %w", err)
		}
		row(tw, "To prove it, serve this JSON at the URL (status 200, no redirect), then run: "+verify)
		row(tw, "  url", d.Proof.WellKnown.URL)
		row(tw, "  body", string(body))
	} else {
		row(tw, "To prove it, publish this DNS record, then run: "+verify)
		row(tw, "  type", d.Proof.DNS.Type)
		row(tw, "  host", d.Proof.DNS.Host)
		row(tw, "  value", d.Proof.DNS.Value)
	}
	return tw.Flush()
}

// formatNewInstallLink prints a new install link: its URL is shown only
// now.
func formatNewInstallLink(w io.Writer, r *dev.InstallLinkResult) error {
	tw := newTable(w)
	row(tw, "install link created "+orDash(r.InstallLink.CreatedAt)+"; any link made before no longer works")
	row(tw, "url", clean(r.InstallLink.URL))
	row(tw, "This URL is shown once: an admin of any workspace who opens it can install the Kit.")
	return tw.Flush()
}

// formatDevInstall prints a dev-install; the signing secret, shown once,
// stands out.
func formatDevInstall(w io.Writer, r *dev.DevInstall) error {
	tw := newTable(w)
	row(tw, fmt.Sprintf("installed %s %s in the sandbox", r.Slug, r.Version))
	row(tw, "kit", r.KitID)
	row(tw, "installation", r.InstallationID)
	if len(r.Endpoints) == 0 {
		row(tw, "endpoints", "none")
	}
	for i, ep := range r.Endpoints {
		label := ""
		if i == 0 {
			label = "endpoints"
		}
		row(tw, label, ep)
	}
	if s := r.SigningSecret; s != nil {
		row(tw, "signing secret", s.SigningSecret+"  (shown once: store it now)")
	}
	return tw.Flush()
}

// formatMe prints who the developer token acts as.
func formatMe(w io.Writer, m *dev.Me) error {
	tw := newTable(w)
	ws := m.WorkspaceID
	if m.Sandbox {
		ws += " (developer sandbox)"
	}
	row(tw, "workspace", ws)
	row(tw, "member", m.UserID)
	row(tw, "token", fmt.Sprintf("%s (%s), expires %s", m.Token.Name, m.Token.ID, m.Token.ExpiresAt))
	return tw.Flush()
}

// formatDeliveries prints the endpoint's health, then a page of
// deliveries as the API sends it (highest sequence first), and the command
// for the next page: of the same --limit, which the cursor does not hold.
func formatDeliveries(w io.Writer, instArg string, limit int, p *dev.DeliveryPage) error {
	ep := "endpoint  " + p.Endpoint.State
	switch {
	case p.Endpoint.PausedAt != nil:
		ep += " since " + logTime(*p.Endpoint.PausedAt) + " (a successful redelivery or a new version resumes it)"
	case p.Endpoint.FailingSince != nil:
		ep += " since " + logTime(*p.Endpoint.FailingSince)
	}
	fmt.Fprintln(w, clean(ep))
	if p.KitState == "suspended" {
		// Nothing is attempted, so the endpoint's health alone would not
		// say why the events wait.
		fmt.Fprintln(w, "the Kit is suspended by the operator: its events wait, not attempted, and go out in order once it is resumed")
	}
	if p.WaitingInOutbox {
		fmt.Fprintln(w, "more events wait in the outbox, past what the installation keeps queued: they are listed once taken")
	}
	if len(p.Deliveries) == 0 {
		_, err := fmt.Fprintln(w, "no deliveries")
		return err
	}
	t := newTable(w)
	row(t, "SEQ", "STATE", "TYPE", "ATTEMPTS", "LAST", "EVENT")
	for _, d := range p.Deliveries {
		last := orDash(d.LastErrorCode)
		switch {
		case d.State == "succeeded" && d.LastHTTPStatus != nil && d.LastErrorCode != nil:
			// lastErrorCode is the last failed attempt's: an earlier one
			// than the success whose status this is.
			last = strconv.Itoa(*d.LastHTTPStatus) + ", earlier " + *d.LastErrorCode
		case d.LastHTTPStatus != nil:
			last = strconv.Itoa(*d.LastHTTPStatus) + " " + last
		}
		typ := d.Type
		if d.Test {
			typ += " (test)"
		}
		row(t, strconv.FormatUint(d.Sequence, 10), d.State, typ, strconv.Itoa(d.Attempts), last, d.EventID)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if p.NextCursor != nil {
		var lim string
		if limit > 0 {
			lim = " --limit " + strconv.Itoa(limit)
		}
		_, err := fmt.Fprintf(w, "more: kit deliveries list %s%s --cursor %s\n", clean(instArg), lim, clean(*p.NextCursor))
		return err
	}
	return nil
}
