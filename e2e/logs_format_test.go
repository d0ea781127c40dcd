package e2e

import (
	"strings"
	"testing"
)

// The request line keeps what docs/decisions.md "Logs" says of it in every
// --log-format and --log-level, now that the front end writes it itself
// (api.RequestLog): text is key=value as slog's text handler writes it,
// and a level above info has no request lines.
func TestRequestLogFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule  string
		flags []string
		// check reads the whole log after a clean stop (which flushes it),
		// given the correlation id of a failed request.
		check func(t *testing.T, log, corr string)
	}{
		{"--log-format text writes the request line as key=value", []string{"--log-format", "text"}, func(t *testing.T, log, corr string) {
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "correlationId="+corr) {
					for _, part := range []string{"level=INFO msg=request node=", ` route="GET /api/v1/messages/{id}" status=404 durationUs=`, " installation="} {
						if !strings.Contains(line, part) {
							t.Errorf("the line lacks %q: %s", part, line)
						}
					}
					if !strings.HasPrefix(line, "time=") {
						t.Errorf("the line does not start with its time: %s", line)
					}
					return
				}
			}
			t.Errorf("no request line with correlationId=%s:\n%s", corr, log)
		}},
		{"without --log-format, a log that is no terminal is JSON", []string{"--log-format", ""}, func(t *testing.T, log, corr string) {
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, corr) {
					if !strings.HasPrefix(line, `{"time":`) {
						t.Errorf("the line is not JSON: %s", line)
					}
					return
				}
			}
			t.Errorf("no request line with %s:\n%s", corr, log)
		}},
		{"--log-level warn writes no request line", []string{"--log-level", "warn"}, func(t *testing.T, log, corr string) {
			if strings.Contains(log, "request") || strings.Contains(log, corr) {
				t.Errorf("a request line at --log-level warn:\n%s", log)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			t.Parallel()
			s := startServerOpts(t, ServerOpts{Args: tt.flags})
			env := newBotEnv(t, s)
			r := env.In.api(t, "GET", "/messages/"+newUUID(), nil)
			wantError(t, r, 404, "not_found")
			if !s.stopClean(t) {
				return
			}
			tt.check(t, string(s.errOut.all()), r.Str("correlationId"))
		})
	}
}
