package limits

import "github.com/kitd/kitd/proto/kitpb"

// Wire is d as it crosses an actor boundary. The rate is left out: every
// node reads the same limits table, and the receiver puts it back
// ([FromWire]).
func (d Decision) Wire() *kitpb.Decision {
	return &kitpb.Decision{
		Ok: d.OK, Remaining: int32(d.Remaining), RetryAfter: int32(d.RetryAfter),
		ResetSeconds: int32(d.ResetSeconds), Policy: string(d.Policy),
	}
}

// FromWire is the decision w carries, with its rate from t (zero when t is
// nil or has no such bucket).
func FromWire(w *kitpb.Decision, t Table) Decision {
	name := Name(w.GetPolicy())
	return Decision{
		OK: w.GetOk(), Remaining: int(w.GetRemaining()), RetryAfter: int(w.GetRetryAfter()),
		ResetSeconds: int(w.GetResetSeconds()), Policy: name, Rate: t[name],
	}
}
