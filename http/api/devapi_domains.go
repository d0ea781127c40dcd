package api

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/actors"
	"github.com/kitd/kitd/http/internal/input"
	"github.com/kitd/kitd/internal/domainproof"
	"github.com/kitd/kitd/internal/ids"
	"github.com/kitd/kitd/internal/kiterr"
	"github.com/kitd/kitd/internal/manifest"
	"github.com/kitd/kitd/proto/kitpb"
)

// Domains of a Kit and the developer sandbox install (docs/api.md "Domain",
// "Developer API"; docs/decisions.md "Domains" and "Dev-install").

// DomainChecker looks for the proof that a Kit controls a domain; it is the
// only part of the developer API that reaches outside kitd. *domainproof.Checker
// is the real one.
type DomainChecker interface {
	CheckDNS(ctx context.Context, kitID, domain, challenge string) error
	CheckWellKnown(ctx context.Context, kitID, domain, challenge string) error
}

// domainCheckTimeout bounds one proof check, whatever the checker's own
// timeouts.
const domainCheckTimeout = 10 * time.Second

const maxDevInstallURL = 2000

var domainMethods = []string{actors.DomainMethodDNS, actors.DomainMethodWellKnown}

type domainView struct {
	Domain     string            `json:"domain"`
	Method     string            `json:"method"`
	Verified   bool              `json:"verified"`
	VerifiedAt *string           `json:"verifiedAt"`
	Challenge  string            `json:"challenge"`
	Proof      domainproof.Proof `json:"proof"`
}

func viewDomain(kitID string, d *kitpb.KitDomain) domainView {
	return domainView{
		Domain: d.Domain, Method: d.Method, Verified: d.Verified, VerifiedAt: optTime(d.VerifiedAt),
		Challenge: d.Challenge, Proof: domainproof.ProofFor(kitID, d.Domain, d.Challenge),
	}
}

func domainReply(status int, r *kitpb.DomainReply) (reply, error) {
	return jsonReply(status, struct {
		Domain domainView `json:"domain"`
	}{viewDomain(r.KitId, r.Domain)})
}

func (s *Server) addDomain(in call) (reply, error) {
	kitID := in.param("kitId")
	if !ids.Valid(kitID) {
		return reply{}, kiterr.Absent("kit")
	}
	var body struct {
		Domain *string `json:"domain"`
		Method *string `json:"method"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.RequireString("domain", body.Domain, 1, 253)
	}
	var domain string
	if err == nil {
		var ok bool
		if domain, ok = domainproof.NormalizeDomain(*body.Domain); !ok {
			err = kiterr.Invalid("domain", "must be a DNS name of at least two labels (letters, digits, hyphens)")
		}
	}
	method := actors.DomainMethodDNS
	if err == nil && body.Method != nil {
		method = *body.Method
		err = input.OneOf("method", method, domainMethods...)
	}
	if err != nil {
		return reply{}, err
	}
	challenge, err := domainproof.NewChallenge()
	if err != nil {
		return reply{}, err
	}
	r, err := ask[*kitpb.DomainReply](s, actors.KindKit, kitID, &kitpb.AddDomain{
		WorkspaceId: in.p.Caller.WorkspaceId, Domain: domain, Method: method, Challenge: challenge,
	})
	if err != nil {
		return reply{}, err
	}
	status := fasthttp.StatusOK
	if r.Created {
		status = fasthttp.StatusCreated
	}
	return domainReply(status, r)
}

// domainOf is the Kit id and the domain of a request about one domain of
// a Kit; a malformed Kit id or domain in the path names nothing (404).
func domainOf(in call) (kitID, domain string, err error) {
	kitID = in.param("kitId")
	if !ids.Valid(kitID) {
		return "", "", kiterr.Absent("kit")
	}
	domain, ok := domainproof.NormalizeDomain(in.param("domain"))
	if !ok {
		return "", "", kiterr.Absent("domain")
	}
	return kitID, domain, nil
}

// verifyDomain checks the proof of the domain's method here, outside any
// actor (it waits on the network), then has the Kit record the outcome.
func (s *Server) verifyDomain(in call) (reply, error) {
	kitID, domain, err := domainOf(in)
	if err != nil {
		return reply{}, err
	}
	if err := in.decodeOptional(&struct{}{}); err != nil {
		return reply{}, err
	}
	ws := in.p.Caller.WorkspaceId
	cur, err := ask[*kitpb.DomainReply](s, actors.KindKit, kitID, &kitpb.GetDomain{WorkspaceId: ws, Domain: domain})
	if err != nil {
		return reply{}, err
	}
	if cur.Domain.Verified {
		return domainReply(fasthttp.StatusOK, cur)
	}
	check, proof := s.domains.CheckDNS, "the DNS TXT record (proof.dns)"
	if cur.Domain.Method == actors.DomainMethodWellKnown {
		check, proof = s.domains.CheckWellKnown, "the well-known document (proof.wellKnown)"
	}
	cctx, cancel := context.WithTimeout(context.Background(), domainCheckTimeout)
	checkErr := check(cctx, kitID, domain, cur.Domain.Challenge)
	cancel()
	if checkErr != nil {
		// The developer gets only which proof failed; the cause (NXDOMAIN,
		// TLS, timeout) is for the operator.
		s.log.Info("domain proof not found", "kit", kitID, "method", cur.Domain.Method, "err", checkErr)
	}
	r, err := ask[*kitpb.DomainReply](s, actors.KindKit, kitID, &kitpb.RecordDomainCheck{
		WorkspaceId: ws, Domain: domain, Challenge: cur.Domain.Challenge, Ok: checkErr == nil,
	})
	if err != nil {
		return reply{}, err
	}
	if checkErr != nil {
		return reply{}, kiterr.New(kiterr.Conflict, "the domain is not verified: "+proof+" was not found or does not hold the challenge")
	}
	return domainReply(fasthttp.StatusOK, r)
}

func (s *Server) removeDomain(in call) (reply, error) {
	kitID, domain, err := domainOf(in)
	if err != nil {
		return reply{}, err
	}
	_, err = ask[*kitpb.Ok](s, actors.KindKit, kitID, &kitpb.RemoveDomain{WorkspaceId: in.p.Caller.WorkspaceId, Domain: domain})
	return okOr(err)
}

// devInstallOrigin checks the url of a dev-install: an absolute https URL
// with a host and no userinfo. Only its origin is used.
func devInstallOrigin(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return nil, kiterr.Invalid("url", "must be an absolute https URL with a host and no user information")
	}
	// url.Parse takes hosts the manifest's URLs refuse (underscores, empty
	// labels, IPv6 zones): refused here, at url, rather than later at an
	// endpoint URL of the manifest that the developer wrote correctly.
	if !manifest.ValidHost(u.Hostname()) {
		return nil, kiterr.Invalid("url", "must have a valid host name or IP address")
	}
	// url.Parse takes any digits, or none, after the colon: the port
	// would otherwise be refused later, at the manifest's endpoint URLs.
	if i := strings.LastIndexByte(u.Host, ':'); i > strings.LastIndexByte(u.Host, ']') {
		if n, err := strconv.Atoi(u.Host[i+1:]); err != nil || n < 1 || n > 65535 {
			return nil, kiterr.Invalid("url", "must have a port from 1 to 65535, or none")
		}
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}

// requireSandbox is 403 forbidden unless the caller's developer token is
// of a sandbox workspace: what names the call in the message.
func (s *Server) requireSandbox(in call, what string) error {
	tok, err := ask[*kitpb.DeveloperTokenReply](s, actors.KindWorkspace, in.p.Caller.WorkspaceId, &kitpb.GetDeveloperToken{TokenId: in.p.TokenID})
	if err == nil && !tok.Sandbox {
		err = kiterr.New(kiterr.Forbidden, what+" needs a developer token of a sandbox workspace")
	}
	return err
}

// devInstall registers a manifest rebased onto a tunnel's origin as a
// private version of the sandbox's Kit and installs it there.
func (s *Server) devInstall(in call) (reply, error) {
	ws := in.p.Caller.WorkspaceId
	if err := s.requireSandbox(in, "dev-install"); err != nil {
		return reply{}, err
	}
	var body struct {
		Manifest *string `json:"manifest"`
		URL      *string `json:"url"`
	}
	err := in.decode(&body)
	if err == nil {
		err = input.FirstError(input.RequireString("manifest", body.Manifest, minManifestLen, maxManifestLen),
			input.RequireString("url", body.URL, 1, maxDevInstallURL))
	}
	var origin *url.URL
	if err == nil {
		origin, err = devInstallOrigin(*body.URL)
	}
	var man *manifest.Manifest
	if err == nil {
		man, err = parseManifest(*body.Manifest)
	}
	var text string
	if err == nil {
		text, err = manifest.Rebase(*body.Manifest, origin)
	}
	if err == nil {
		// The rebased text is what is registered: it must pass the same
		// rules (a longer origin can push a URL or the text over a limit).
		if utf8.RuneCountInString(text) > maxManifestLen {
			err = kiterr.Invalid("manifest", "is longer than 65536 characters once rebased onto url")
		} else {
			man, err = parseManifest(text)
		}
	}
	if err != nil {
		return reply{}, err
	}
	v, err := s.registerVersion(ws, man, text, false)
	if err != nil {
		return reply{}, err
	}
	inst, err := ask[*kitpb.InstallationReply](s, actors.KindWorkspace, ws, &kitpb.Install{KitId: v.Kit.Id, Version: v.Version.Version})
	if err != nil {
		return reply{}, err
	}
	secret := ids.NewSecret(ids.SigningSecret)
	hash := ids.Hash(secret)
	done, err := ask[*kitpb.DevInstalledReply](s, actors.KindKit, v.Kit.Id, &kitpb.DevInstalled{
		WorkspaceId: ws, Version: v.Version.Version, InstallationId: inst.Installation.Id, SigningSecretHash: hash[:], SigningSecret: secret,
	})
	if err != nil {
		return reply{}, err
	}
	type signingSecretView struct {
		SigningSecret     string  `json:"signingSecret"`
		Generation        int32   `json:"generation"`
		PreviousExpiresAt *string `json:"previousExpiresAt,omitempty"`
	}
	res := struct {
		KitID          string             `json:"kitId"`
		Slug           string             `json:"slug"`
		Version        string             `json:"version"`
		InstallationID string             `json:"installationId"`
		Endpoints      []string           `json:"endpoints"`
		SigningSecret  *signingSecretView `json:"signingSecret,omitempty"`
	}{KitID: v.Kit.Id, Slug: v.Kit.Slug, Version: v.Version.Version, InstallationID: inst.Installation.Id, Endpoints: nonNil(man.EndpointURLs())}
	if ss := done.SigningSecret; ss != nil {
		res.SigningSecret = &signingSecretView{SigningSecret: secret, Generation: ss.Generation}
		in.carriesSecret()
	}
	return jsonReply(fasthttp.StatusCreated, res)
}
