package hub

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Namespace is a set of event hubs with their storage. It is safe for
// concurrent use. Open may start one background goroutine (retention and
// interval fsync); Close stops it and waits for it.
type Namespace struct {
	cfg       Config // with defaults; read-only after Open
	hubs      map[string]*Hub
	busyUntil atomic.Int64 // unix ns until which Append answers server-busy; 0 = never

	stop      chan struct{} // closed by Close to stop the background goroutine
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Open creates the namespace: it validates cfg, and with cfg.DataDir it
// loads every partition from disk (truncating a torn last record) or creates
// its directory. It starts a background goroutine when Retention or
// RetentionBytes is set, or when DataDir is set with FsyncInterval.
func Open(cfg Config) (*Namespace, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("hub: invalid config: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.Hubs = slices.Clone(cfg.Hubs)
	n := &Namespace{cfg: cfg, hubs: map[string]*Hub{}, stop: make(chan struct{})}
	now := cfg.Now()
	for _, hc := range cfg.Hubs {
		h := &Hub{ns: n, name: hc.Name, createdAt: now.UTC().Truncate(time.Millisecond), cgs: map[string]bool{DefaultConsumerGroup: true}}
		for _, cg := range hc.ConsumerGroups {
			h.cgs[cg] = true
		}
		count := hc.Partitions
		if cfg.DataDir != "" {
			h.dir = filepath.Join(cfg.DataDir, hc.Name)
			m, err := loadOrCreateMeta(h.dir, now, cfg.Fsync != FsyncNever)
			if err != nil {
				n.closePartitions()
				return nil, fmt.Errorf("hub %q: %w", hc.Name, err)
			}
			h.createdAt = m.CreatedAt
			count = max(count, m.Partitions) // a grown hub stays grown
		}
		n.hubs[hc.Name] = h
		l, err := h.open(&layout{}, count)
		if err != nil {
			n.closePartitions()
			return nil, err
		}
		h.layout.Store(l)
	}
	if err := n.EnforceRetention(); err != nil {
		n.closePartitions()
		return nil, err
	}
	if every := n.backgroundEvery(); every > 0 {
		n.wg.Add(1)
		go n.background(every)
	}
	return n, nil
}

func (n *Namespace) now() time.Time { return n.cfg.Now() }

// backgroundEvery returns the background goroutine's period, 0 for none.
func (n *Namespace) backgroundEvery() time.Duration {
	var every time.Duration
	if n.cfg.Retention > 0 || n.cfg.RetentionBytes > 0 {
		every = n.cfg.RetentionCheckEvery
	}
	if n.cfg.DataDir != "" && n.cfg.Fsync == FsyncInterval && (every == 0 || n.cfg.FsyncEvery < every) {
		every = n.cfg.FsyncEvery
	}
	return every
}

// background applies retention and interval fsync until Close.
func (n *Namespace) background(every time.Duration) {
	defer n.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	lastRetention := time.Now()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if n.cfg.DataDir != "" && n.cfg.Fsync == FsyncInterval {
			for _, p := range n.partitions() {
				if err := p.syncIfDirty(); err != nil {
					p.log.Warn("interval fsync", "err", err)
				}
			}
		}
		if (n.cfg.Retention > 0 || n.cfg.RetentionBytes > 0) && time.Since(lastRetention) >= n.cfg.RetentionCheckEvery {
			lastRetention = time.Now()
			if err := n.EnforceRetention(); err != nil {
				n.cfg.Logger.Warn("applying retention", "err", err)
			}
		}
	}
}

func (n *Namespace) partitions() []*partition {
	var ps []*partition
	for _, h := range n.hubs {
		if l := h.layout.Load(); l != nil {
			ps = append(ps, l.parts...)
		}
	}
	return ps
}

// EnforceRetention applies Retention (against Config.Now) and RetentionBytes
// to every partition now, instead of waiting for the background goroutine.
// It returns the I/O errors met, joined.
func (n *Namespace) EnforceRetention() error {
	if n.cfg.Retention <= 0 && n.cfg.RetentionBytes <= 0 {
		return nil
	}
	nowMs := n.now().UnixMilli()
	var errs []error
	for _, p := range n.partitions() {
		p.mu.Lock()
		if !p.closed {
			if err := p.enforceRetentionLocked(nowMs); err != nil {
				errs = append(errs, err)
			}
		}
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Close stops the background goroutine and waits for it, closes every
// receiver (their Next returns ErrClosed; OnDetach is not called), syncs
// (unless FsyncNever) and closes the segment files. It is idempotent and
// returns the same result every time. Hubs and receivers stay valid values:
// their methods return ErrClosed.
func (n *Namespace) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.wg.Wait()
		n.closeErr = n.closePartitions()
	})
	return n.closeErr
}

func (n *Namespace) closePartitions() error {
	var errs []error
	for _, p := range n.partitions() {
		if err := p.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Hub returns the hub with the given name, or an *Error with CondNotFound.
func (n *Namespace) Hub(name string) (*Hub, error) {
	if h, ok := n.hubs[name]; ok {
		return h, nil
	}
	// The service matches entity names case-insensitively.
	for hn, h := range n.hubs {
		if strings.EqualFold(hn, name) {
			return h, nil
		}
	}
	return nil, errHubNotFound(name)
}

// Hubs returns every hub, sorted by name.
func (n *Namespace) Hubs() []*Hub {
	out := make([]*Hub, 0, len(n.hubs))
	for _, h := range n.hubs {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b *Hub) int {
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	return out
}

// SetServerBusy makes every Append fail with an *Error with CondServerBusy
// until the given time (by Config.Now). A zero or past time ends it.
func (n *Namespace) SetServerBusy(until time.Time) {
	if until.IsZero() {
		n.busyUntil.Store(0)
		return
	}
	n.busyUntil.Store(until.UnixNano())
}

// ForceDetach detaches every receiver of the partition, in every consumer
// group: each one's OnDetach is called with an *Error with CondDetachForced
// and its Next returns that error. It returns how many receivers were
// detached; an unknown hub or partition detaches none.
func (n *Namespace) ForceDetach(hub, partition string) int {
	h, ok := n.hubs[hub]
	if !ok {
		return 0
	}
	p, err := h.partition(partition)
	if err != nil {
		return 0
	}
	e := errForcedDetach(hub, partition)
	p.mu.Lock()
	var detached []*Receiver
	for _, g := range p.groups {
		for _, r := range g.all() {
			r.detachLocked(e)
			detached = append(detached, r)
		}
	}
	p.mu.Unlock()
	for _, r := range detached {
		r.notifyDetach(e)
	}
	return len(detached)
}
