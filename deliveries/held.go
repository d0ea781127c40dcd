package deliveries

// A suspended Kit's events are held (docs/deliveries.md "A suspended
// Kit"): they stay queued in their installation's delivery actor, are not
// attempted and so never dead-lettered, and go out in order once the Kit
// is resumed. The pump of such an installation takes nothing: it retires
// and is noted here, by Kit, until KitStateChanged starts it again.

// heldPumps are the installations held, by Kit, each with whether its
// pump had lost a take (pump.lost): the pump started again reclaims it.
type heldPumps map[string]map[string]bool

// suspended reports whether the Kit is suspended; an error counts as
// not: the take and the attempt then find out what is wrong.
func (s *Sender) suspended(kitID string) bool {
	if s.cfg.KitState == nil || kitID == "" {
		return false
	}
	st, err := s.cfg.KitState(kitID)
	return err == nil && st.Suspended
}

// kitResumedAt is when the Kit was last resumed from a suspension, which
// an attempt's record carries: the failures' clocks restart there, as the
// suspension held the events (actors' RecordAttempt.kit_resumed_at). 0:
// never, or unknown.
func (s *Sender) kitResumedAt(kitID string) int64 {
	if s.cfg.KitState == nil || kitID == "" {
		return 0
	}
	st, err := s.cfg.KitState(kitID)
	if err != nil {
		return 0
	}
	return st.ResumedAt
}

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
