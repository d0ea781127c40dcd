package actors

import "github.com/kitd/kitd/internal/metrics"

// activity counts activations and passivations by actor kind, for the
// node's metrics. An actor touches its kind's counters once when it
// activates and once when it stops, never per request.
type activity struct {
	kinds [len(kindNames)]kindActivity
}

type kindActivity struct {
	activations  metrics.Counter
	passivations metrics.Counter // every stop: idle, entity absent, failed activation
	restarts     metrics.Counter // an incarnation ended by a panic, started again
}

// kindNames lists the kinds in the order of their counters.
var kindNames = [...]string{KindWorkspace, KindConversation, KindInstallation, KindKit, KindSlug, KindWebhook, KindDelivery}

// of returns the counters of kind, nil for a kind kindNames lacks.
func (a *activity) of(kind string) *kindActivity {
	for i, k := range kindNames {
		if k == kind {
			return &a.kinds[i]
		}
	}
	return nil
}

// Collect writes the actor families: activations, passivations, restarts
// and the actors live now, by kind; then the deliveries'
// (delivery_metrics.go).
func (e *Env) Collect(w *metrics.Writer) {
	var labels [len(kindNames)]metrics.Labels
	var act, pass, restart [len(kindNames)]uint64
	for i, k := range kindNames {
		labels[i] = metrics.Label("kind", k)
		// Ends first: an actor that activates and stops between the
		// reads then never shows as live -1.
		pass[i] = e.activity.kinds[i].passivations.Load()
		restart[i] = e.activity.kinds[i].restarts.Load()
		act[i] = e.activity.kinds[i].activations.Load()
	}
	w.Family("kitd_actor_activations_total", "Actor activations (an actor read from storage on its first request).", metrics.TypeCounter)
	for i := range kindNames {
		w.Uint("kitd_actor_activations_total", labels[i], act[i])
	}
	w.Family("kitd_actor_passivations_total", "Actors stopped: idle for the idle timeout, their entity absent, or their activation failed.", metrics.TypeCounter)
	for i := range kindNames {
		w.Uint("kitd_actor_passivations_total", labels[i], pass[i])
	}
	w.Family("kitd_actor_restarts_total", "Actors started again after a panic in a handler (a bug: the log has its stack).", metrics.TypeCounter)
	for i := range kindNames {
		w.Uint("kitd_actor_restarts_total", labels[i], restart[i])
	}
	w.Family("kitd_actors_live", "Actors active now.", metrics.TypeGauge)
	for i := range kindNames {
		// A restart's new incarnation counted an activation of its own.
		w.Uint("kitd_actors_live", labels[i], act[i]-pass[i]-restart[i])
	}
	e.History.Collect(w)
	e.deliveryStats.collect(w, e.Clock.Now(), e.deliveryMemory.used.Load())
}
