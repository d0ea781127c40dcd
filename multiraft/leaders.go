package multiraft

import "sync"

// leaderQueue carries LeaderChange events from the driver to the consumer
// without ever blocking the driver: push appends to an unbounded queue, a
// goroutine of its own feeds the channel.
type leaderQueue struct {
	mu    sync.Mutex
	queue []LeaderChange
	more  chan struct{} // capacity 1
	out   chan LeaderChange
}

func newLeaderQueue() *leaderQueue {
	return &leaderQueue{more: make(chan struct{}, 1), out: make(chan LeaderChange)}
}

func (q *leaderQueue) push(c LeaderChange) {
	q.mu.Lock()
	q.queue = append(q.queue, c)
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

func (q *leaderQueue) pump(stop <-chan struct{}) {
	for {
		q.mu.Lock()
		batch := q.queue
		q.queue = nil
		q.mu.Unlock()
		for _, c := range batch {
			select {
			case q.out <- c:
			case <-stop:
				return
			}
		}
		select {
		case <-q.more:
		case <-stop:
			return
		}
	}
}
