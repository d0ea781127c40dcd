package server

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/kitd/kitd/http/tlscert"
)

const demoManifest = `{
  "schemaVersion": 1,
  "slug": "demo-kit",
  "version": "1.0.0",
  "displayName": {"en": "Demo Kit"},
  "description": {"en": "A first look at kitd."},
  "developer": {"name": "kitd", "url": "https://example.com"},
  "privacyPolicyUrl": "https://example.com/privacy",
  "bot": {"displayName": {"en": "Demo Bot"}, "scopes": ["conversations:read", "messages:read", "messages:write", "users:read"]},
  "distribution": "private"
}`

// The demo owner's sign-in, which the banner prints: a demo on a fresh
// directory, for whoever started it.
const (
	demoOwnerEmail    = "owner@demo.test"
	demoOwnerPassword = "demo-password"
)

// createDemo builds a demo workspace through the server's own operator and
// developer APIs, so the demo exercises exactly what a client would, and
// prints it with the commands to try at publicURL.
func createDemo(c *demoClient, publicURL, opToken string, out io.Writer) error {
	var ws struct{ Workspace struct{ ID string } }
	if err := c.do(opToken, "POST", "/ops/v1/workspaces", map[string]any{"name": "Demo"}, &ws); err != nil {
		return err
	}
	var owner struct{ User struct{ ID string } }
	if err := c.do(opToken, "POST", "/ops/v1/workspaces/"+ws.Workspace.ID+"/users",
		map[string]any{"displayName": "Demo Owner", "email": demoOwnerEmail, "role": "owner", "password": demoOwnerPassword}, &owner); err != nil {
		return err
	}
	var conv struct{ Conversation struct{ ID string } }
	if err := c.do(opToken, "POST", "/ops/v1/workspaces/"+ws.Workspace.ID+"/conversations",
		map[string]any{"kind": "channel", "visibility": "public", "name": "general", "memberIds": []string{owner.User.ID}}, &conv); err != nil {
		return err
	}
	var dev struct{ Token string }
	if err := c.do(opToken, "POST", "/ops/v1/users/"+owner.User.ID+"/developer-tokens", map[string]any{"name": "demo"}, &dev); err != nil {
		return err
	}
	var kit struct{ KitID string }
	if err := c.do(dev.Token, "POST", "/api/v1/dev/kits/versions", map[string]any{"manifest": demoManifest, "publish": true}, &kit); err != nil {
		return err
	}
	var inst struct{ Installation struct{ ID string } }
	if err := c.do(opToken, "POST", "/ops/v1/workspaces/"+ws.Workspace.ID+"/installations", map[string]any{"kitId": kit.KitID}, &inst); err != nil {
		return err
	}
	if err := c.do(opToken, "POST", "/ops/v1/installations/"+inst.Installation.ID+"/channels", map[string]any{"conversationId": conv.Conversation.ID}, nil); err != nil {
		return err
	}
	var bot struct{ Token string }
	if err := c.do(opToken, "POST", "/ops/v1/installations/"+inst.Installation.ID+"/bot-tokens", nil, &bot); err != nil {
		return err
	}
	api := publicURL + "/api/v1"
	fmt.Fprintf(out, `
Demo workspace created (shown once; secrets are stored only as hashes):
  web app        %s/app/
  sign in as     %s / %s (the owner)
  workspace      %s
  owner          %s
  channel        #general %s
  kit            demo-kit %s
  installation   %s
  bot token      %s
  developer token %s
  operator token %s

Try:
  curl -s -H 'Authorization: Bearer %s' %s/auth/test
  curl -s -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \
       -d '{"conversationId":"%s","text":"Hello from the demo bot"}' %s/messages
  curl -s -H 'Authorization: Bearer %s' '%s/conversations/%s/messages?limit=10'

The developer CLI (make build puts it in bin/kit):
  KIT_DEV_TOKEN=%s KIT_API_URL=%s bin/kit kits show demo-kit

`, publicURL, demoOwnerEmail, demoOwnerPassword, ws.Workspace.ID, owner.User.ID, conv.Conversation.ID, kit.KitID, inst.Installation.ID,
		bot.Token, dev.Token, opToken,
		bot.Token, api, bot.Token, conv.Conversation.ID, api, bot.Token, api, conv.Conversation.ID,
		dev.Token, api)
	return nil
}

type demoClient struct {
	base string
	http *http.Client
}

// newDemoClient calls the node itself at its listener addr, whatever
// --public-url names (a proxy in front may not be up yet). With certs
// (HTTPS) it trusts the certificate the node serves, and nothing else:
// a certificate of a private CA, or self-signed, is no system root's.
func newDemoClient(addr net.Addr, certs *tlscert.Holder) *demoClient {
	host := addr.String()
	if a, ok := addr.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		host = net.JoinHostPort("localhost", strconv.Itoa(a.Port))
	}
	tr := &http.Transport{Proxy: nil}
	c := &demoClient{base: "http://" + host, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}}
	if certs != nil {
		c.base = "https://" + host
		tr.TLSClientConfig = &tls.Config{
			InsecureSkipVerify: true, // no chain to verify: the leaf itself is checked
			VerifyConnection: func(cs tls.ConnectionState) error {
				own := certs.Current()
				if len(cs.PeerCertificates) == 0 || own == nil || !bytes.Equal(cs.PeerCertificates[0].Raw, own.Certificate[0]) {
					return errors.New("demo: the listener served a certificate other than the node's own")
				}
				return nil
			},
		}
	}
	return c
}

func (c *demoClient) do(token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
