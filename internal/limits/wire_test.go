package limits

import "testing"

func TestDecisionWire(t *testing.T) {
	table := Spec()
	tests := []struct {
		name  string
		d     Decision
		table Table
		want  Decision
	}{
		{"a refusal crosses with its bucket and gets its rate back", Decision{RetryAfter: 3, ResetSeconds: 60, Policy: Write, Rate: table[Write]}, table,
			Decision{RetryAfter: 3, ResetSeconds: 60, Policy: Write, Rate: table[Write]}},
		{"a grant keeps what remains", Decision{OK: true, Remaining: 41, ResetSeconds: 9, Policy: Read}, table,
			Decision{OK: true, Remaining: 41, ResetSeconds: 9, Policy: Read, Rate: table[Read]}},
		{"without a table the rate stays unknown", Decision{OK: true, Remaining: 2, Policy: Webhook, Rate: table[Webhook]}, nil,
			Decision{OK: true, Remaining: 2, Policy: Webhook}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromWire(tt.d.Wire(), tt.table); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
