// Package kitverify checks that a request came from kitd: the
// Service-Signature header of a delivery to a Kit's endpoint (events,
// interactions, slash commands, tool calls). docs/deliveries.md gives the
// algorithm for other languages, with a worked example.
//
// A Kit's handler passes the header, the raw body as received (before any
// JSON decoding) and its signing secrets: the current one, and during the
// 7 days after a rotation the previous one too.
package kitverify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the name of the signature header.
const Header = "Service-Signature"

// Tolerance is how far the signature's time may be from the receiver's
// clock, either way: an older request is refused as a possible replay.
const Tolerance = 300 * time.Second

// Why a signature is refused.
var (
	ErrMalformed = errors.New("kitverify: malformed signature header")
	ErrExpired   = errors.New("kitverify: signature time outside the tolerance")
	ErrMismatch  = errors.New("kitverify: no signature matches")
)

// Sign returns the header value for body sent at t: one v1 per secret
// (kitd signs with every valid secret during a rotation).
func Sign(t time.Time, body []byte, secrets ...string) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

// Verify checks header against body at the receiver's time now: its time
// must be within Tolerance and one of its v1 values must be the HMAC of one
// of secrets. Every comparison takes constant time. An empty secret (a
// previous one when there is none) verifies nothing: anyone can compute
// the HMAC of the empty key.
func Verify(header string, body []byte, now time.Time, secrets ...string) error {
	ts, sigs, err := parse(header)
	if err != nil {
		return err
	}
	sec, _ := strconv.ParseInt(ts, 10, 64)
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrExpired
	}
	ok := false
	for _, s := range secrets {
		if s == "" {
			continue
		}
		want := mac(s, ts, body)
		for _, got := range sigs {
			// No early exit: the time taken does not say which matched.
			if hmac.Equal(want, got) {
				ok = true
			}
		}
	}
	if !ok {
		return ErrMismatch
	}
	return nil
}

// parse splits "t=<unix>,v1=<hex>[,v1=<hex>...]"; other keys are ignored,
// so that later schemes can be added beside v1.
func parse(header string) (ts string, sigs [][]byte, err error) {
	for _, part := range strings.Split(header, ",") {
		k, v, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found {
			return "", nil, ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" || v == "" || strings.Trim(v, "0123456789") != "" || len(v) > 18 {
				return "", nil, ErrMalformed
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return "", nil, ErrMalformed
			}
			sigs = append(sigs, sig)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return "", nil, ErrMalformed
	}
	return ts, sigs, nil
}

// mac is HMAC-SHA256 of "<t>.<body>" keyed with the secret as shown,
// kss_ prefix included, as UTF-8 bytes.
func mac(secret, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
