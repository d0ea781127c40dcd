package deliveries

import "github.com/kitd/kitd/actors"

// A suspended Kit's events are held (docs/deliveries.md "A suspended
// Kit"): they stay queued in their installation's delivery actor, are not
// attempted and so never dead-lettered, and go out in order once the Kit
// is resumed. The pump of such an installation takes nothing: it retires
// and is noted here, by Kit, until KitStateChanged starts it again.

// heldPumps are the installations held, by Kit, each with whether its
// pump had lost a take (pump.lost): the pump started again reclaims it.
type heldPumps map[string]map[string]bool

// kitState is the Kit's state as the node keeps it; an error counts as
// active and never resumed: the take and the attempt then find out what
// is wrong. Its ResumedAt goes in an attempt's record: the failures'
// clocks restart there, as the suspension held the events (actors'
// RecordAttempt.kit_resumed_at).
func (s *Sender) kitState(kitID string) actors.KitState {
	if s.cfg.KitState == nil || kitID == "" {
		return actors.KitState{}
	}
	st, err := s.cfg.KitState(kitID)
	if err != nil {
		return actors.KitState{}
	}
	return st
}

// suspended reports whether the Kit is suspended (kitState).
func (s *Sender) suspended(kitID string) bool { return s.kitState(kitID).Suspended }

// hold retires the pump of an installation whose Kit is suspended, once
// no chain of it runs (they take nothing more, Sender.chain), and notes
// it for KitStateChanged. It reports whether the pump is to end.
func (s *Sender) hold(inst string, p *pump) bool {
	if s.cfg.KitState == nil {
		return false
	}
	for {
		in, err := s.installed(inst)
		if err != nil {
			return false
		}
		s.mu.Lock()
		gen := s.heldGen
		s.mu.Unlock()
		if !s.suspended(in.kitID) {
			return false
		}
		if p.chains.Load() > 0 {
			// The last chain to end wakes the pump, which holds then.
			select {
			case <-p.wake:
			case <-s.done:
				return true
			}
			continue
		}
		s.mu.Lock()
		if s.heldGen != gen {
			s.mu.Unlock()
			continue // the Kit's state changed while it was read
		}
		if s.held == nil {
			s.held = make(heldPumps)
		}
		if s.held[in.kitID] == nil {
			s.held[in.kitID] = make(map[string]bool)
		}
		s.held[in.kitID][inst] = s.held[in.kitID][inst] || p.lost.Load()
		if s.pumps[inst] == p {
			delete(s.pumps, inst)
		}
		s.mu.Unlock()
		return true
	}
}

// KitStateChanged starts again the pumps held for the Kit: resumed, its
// events go out; suspended still, each pump holds again
// (actors.TargetCache).
func (s *Sender) KitStateChanged(kitID string) {
	s.mu.Lock()
	s.heldGen++
	held := s.held[kitID]
	delete(s.held, kitID)
	s.mu.Unlock()
	for inst, lost := range held {
		s.wakePump(inst, lost)
	}
}
