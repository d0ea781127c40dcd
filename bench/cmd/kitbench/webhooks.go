package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/kitd/kitd/bench/loadgen"
)

// webhooksPerKit is the most webhooks one installation may have
// (incomingWebhooks.maxPerInstallation is 1-20, docs/api.md "Limits"): the bench
// installs as many Kits as it needs to reach its webhook count.
const webhooksPerKit = 20

// webhookManifest is the bench manifest under slug, with bot scope
// incoming-webhook and 20 webhooks per installation.
func webhookManifest(slug string) string {
	m := manifestWithSlug(slug)
	m = strings.Replace(m, `"scopes":[`, `"scopes":["incoming-webhook",`, 1)
	return strings.Replace(m, `"distribution":"private"}`,
		`"incomingWebhooks":{"maxPerInstallation":20},"distribution":"private"}`, 1)
}

// setupWebhooks creates n incoming webhooks, webhook i into write channel
// i % len(channels), created by the workspace owner (a member of every
// bench channel). Each run of 20 belongs to its own Kit and installation.
// It returns the webhook URLs' paths.
func setupWebhooks(ctx context.Context, c *setupClient, f *fixture, n int) ([]string, error) {
	op := c.cfg.OperatorToken
	base := c.cfg.Slug
	if base == "" {
		base = "bench-kit"
	}
	kits := (n + webhooksPerKit - 1) / webhooksPerKit
	installs := make([]string, kits)
	start := time.Now()
	err := parallel(ctx, c.cfg.Parallel, kits, func(ctx context.Context, k int) error {
		var err error
		installs[k], err = c.installKit(ctx, f, webhookManifest(base+"-wh"+strconv.Itoa(k)))
		return err
	})
	if err != nil {
		return nil, err
	}
	paths := make([]string, n)
	err = parallel(ctx, c.cfg.Parallel, n, func(ctx context.Context, i int) error {
		var hook struct {
			URL string `json:"url"`
		}
		if _, err := c.call(ctx, "POST", "/ops/v1/installations/"+installs[i/webhooksPerKit]+"/webhooks", op,
			map[string]any{"conversationId": f.Conversations[i%len(f.Conversations)], "createdByUserId": f.OwnerID},
			http.StatusCreated, &hook); err != nil {
			return err
		}
		at := strings.Index(hook.URL, "/hooks/")
		if at < 0 {
			return fmt.Errorf("set-up: webhook url %q has no /hooks/ path", hook.URL)
		}
		paths[i] = hook.URL[at:]
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.cfg.Progress("%d webhooks over %d Kits created in %v", n, kits, time.Since(start).Round(time.Millisecond))
	return paths, nil
}

// webhookScenario posts "bench webhook <n>" to paths[n % len], with no
// token: the URL is the credential.
func webhookScenario(name string, paths []string) loadgen.Scenario {
	return loadgen.Scenario{Name: name, Build: func(n uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(paths[n%uint64(len(paths))])
		req.Header.SetContentType("application/json")
		var num [20]byte
		req.AppendBodyString(`{"text":"bench webhook `)
		req.AppendBody(strconv.AppendUint(num[:0], n, 10))
		req.AppendBodyString(`"}`)
	}}
}
