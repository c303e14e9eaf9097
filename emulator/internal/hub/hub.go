package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/internal/durable"
)

// Hub is one event hub: its partitions and consumer groups. Partitions can
// be added while it runs (as Event Hubs Premium and Dedicated allow), never
// removed. It is safe for concurrent use.
type Hub struct {
	ns        *Namespace
	name      string
	dir       string // DataDir/<hub>, or "" in memory
	createdAt time.Time
	layout    atomic.Pointer[layout] // replaced whole when partitions are added
	growMu    sync.Mutex             // serialises AddPartitions
	cgs       map[string]bool        // declared consumer groups, "$Default" included; read-only
	rr        atomic.Uint64          // round-robin counter for keyless sends
}

// layout is a hub's partitions at one time: readers load it once and see
// a consistent set while partitions are added.
type layout struct {
	parts []*partition
	ids   []string
}

// Name returns the hub's name.
func (h *Hub) Name() string { return h.name }

// CreatedAt returns when the hub was first created. With a DataDir it
// survives restarts.
func (h *Hub) CreatedAt() time.Time { return h.createdAt }

// PartitionIDs returns the partition IDs, "0" to "N-1", in a new slice.
func (h *Hub) PartitionIDs() []string { return slices.Clone(h.layout.Load().ids) }

// PartitionCount returns the number of partitions.
func (h *Hub) PartitionCount() int { return len(h.layout.Load().parts) }

// AddPartitions grows the hub to count partitions: the new ones, "N" to
// "count-1", are empty and take keyed and round-robin sends at once (a key
// may then map to another partition, as in Event Hubs). With a DataDir the
// count is stored before the partitions are used, so that a restart with
// the hub's configured, smaller count keeps them. count may not be below
// the current count (a hub never shrinks) nor above MaxPartitions.
func (h *Hub) AddPartitions(count int) error {
	h.growMu.Lock()
	defer h.growMu.Unlock()
	cur := h.layout.Load()
	switch {
	case count < len(cur.parts):
		return &Error{Condition: CondInvalidField, Description: fmt.Sprintf(
			"The event hub %q has %d partitions; a partition count cannot be decreased to %d.", h.name, len(cur.parts), count)}
	case count > MaxPartitions:
		return &Error{Condition: CondInvalidField, Description: fmt.Sprintf(
			"The event hub %q cannot have %d partitions; at most %d are allowed.", h.name, count, MaxPartitions)}
	case count == len(cur.parts):
		return nil
	}
	if h.dir != "" {
		if err := storeMeta(h.dir, hubMeta{CreatedAt: h.createdAt, Partitions: count}, h.ns.cfg.Fsync != FsyncNever); err != nil {
			return fmt.Errorf("hub %q: storing its partition count: %w", h.name, err)
		}
	}
	next, err := h.open(cur, count)
	if err != nil {
		return err
	}
	h.layout.Store(next)
	return nil
}

// open returns cur grown to count partitions, each loaded from (or made
// in) its directory under h.dir. On error the partitions it opened are
// closed.
func (h *Hub) open(cur *layout, count int) (*layout, error) {
	next := &layout{parts: slices.Clone(cur.parts), ids: slices.Clone(cur.ids)}
	for i := len(cur.parts); i < count; i++ {
		id := strconv.Itoa(i)
		dir := ""
		if h.dir != "" {
			dir = filepath.Join(h.dir, id)
		}
		p := newPartition(h, id, dir, &h.ns.cfg)
		if dir != "" {
			if err := p.load(); err != nil {
				for _, q := range next.parts[len(cur.parts):] {
					_ = q.close()
				}
				return nil, err
			}
		}
		next.parts = append(next.parts, p)
		next.ids = append(next.ids, id)
	}
	return next, nil
}

// HasConsumerGroup reports whether receivers may use consumer group name.
// "$Default" always exists.
func (h *Hub) HasConsumerGroup(name string) bool { return h.cgs[name] }

// ConsumerGroups returns the consumer groups, sorted, "$Default" included.
func (h *Hub) ConsumerGroups() []string {
	out := make([]string, 0, len(h.cgs))
	for cg := range h.cgs {
		out = append(out, cg)
	}
	slices.Sort(out)
	return out
}

// partition returns the partition with the given ID, or an *Error with
// CondArgumentOutOfRange.
func (h *Hub) partition(id string) (*partition, error) {
	parts := h.layout.Load().parts
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(parts) || strconv.Itoa(i) != id {
		return nil, errPartitionOutOfRange(id, len(parts))
	}
	return parts[i], nil
}

// PartitionProperties describes a partition's retained events.
type PartitionProperties struct {
	// BeginSequenceNumber is the first retained sequence number (0 for an
	// empty new partition; after retention dropped everything,
	// LastEnqueuedSequenceNumber+1).
	BeginSequenceNumber int64
	// LastEnqueuedSequenceNumber is the last event's sequence number, -1 if
	// no event was ever appended. It stays after retention drops the event.
	LastEnqueuedSequenceNumber int64
	// LastEnqueuedOffset is the last event's offset, "-1" if none.
	LastEnqueuedOffset string
	// LastEnqueuedTime is the last event's enqueued time (UTC, ms), unix 0 if none.
	LastEnqueuedTime time.Time
	// IsEmpty reports that no event is retained.
	IsEmpty bool
}

// PartitionProperties returns the properties of partition id. An unknown id
// is an *Error with CondArgumentOutOfRange.
func (h *Hub) PartitionProperties(id string) (PartitionProperties, error) {
	p, err := h.partition(id)
	if err != nil {
		return PartitionProperties{}, err
	}
	return p.properties(), nil
}

// Append stores msgs (encoded inner AMQP messages, kept verbatim; the hub
// copies them) as consecutive events of one partition, atomically and in
// order, and returns that partition's ID. The events are visible to
// receivers and PartitionProperties when Append returns.
//
// partitionID selects the partition; if it is "", key does: the FNV-1a hash
// of *key modulo the partition count (stable across restarts), or, with no
// key, the next partition round-robin. key is stored with every event
// (PartitionKey on receive).
//
// Errors: *Error with CondServerBusy while SetServerBusy is in effect,
// CondArgumentOutOfRange for an unknown partition, CondInvalidField for a key
// longer than MaxPartitionKeyLen, CondMessageSizeExceeded for a message over
// about 1 GiB (the protocol layer enforces its own, smaller limit first);
// ErrClosed after Close; I/O errors naming the partition and file. After a
// failed write that could not be undone, the partition refuses appends until
// the namespace is reopened.
func (h *Hub) Append(partitionID string, key *string, msgs [][]byte) (string, error) {
	now := h.ns.now()
	if until := h.ns.busyUntil.Load(); until != 0 && now.UnixNano() < until {
		wait := (until - now.UnixNano() + int64(time.Second) - 1) / int64(time.Second)
		return "", errServerBusy(wait)
	}
	if key != nil && len(*key) > MaxPartitionKeyLen {
		return "", &Error{Condition: CondInvalidField, Description: fmt.Sprintf(
			"The partition key is %d bytes long; at most %d are allowed.", len(*key), MaxPartitionKeyLen)}
	}
	for i, m := range msgs {
		if recordLen(key, m) > recMaxLen {
			return "", &Error{Condition: CondMessageSizeExceeded, Description: fmt.Sprintf(
				"Message %d of the batch is %d bytes; the emulator stores at most %d.", i, len(m), recMaxLen-recHeaderLen-MaxPartitionKeyLen)}
		}
	}
	var p *partition
	switch {
	case partitionID != "":
		var err error
		if p, err = h.partition(partitionID); err != nil {
			return "", err
		}
	case key != nil:
		parts := h.layout.Load().parts
		p = parts[fnv1a(*key)%uint32(len(parts))]
	default:
		parts := h.layout.Load().parts
		p = parts[(h.rr.Add(1)-1)%uint64(len(parts))]
	}
	if err := p.append(now.UnixMilli(), key, msgs); err != nil {
		return "", err
	}
	return p.id, nil
}

// PartitionForKey returns the partition Append picks for key when no
// partition ID is given.
func (h *Hub) PartitionForKey(key string) string {
	l := h.layout.Load()
	return l.ids[fnv1a(key)%uint32(len(l.parts))]
}

// fnv1a is the 32-bit FNV-1a hash.
func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// hubMeta is the content of DataDir/<hub>/hub.json.
type hubMeta struct {
	CreatedAt time.Time `json:"created_at"`
	// Partitions is the count partitions were added up to while the hub
	// ran (0: never grown, the configured count holds).
	Partitions int `json:"partitions,omitempty"`
}

// loadOrCreateMeta reads the hub's metadata file, creating it on first use.
func loadOrCreateMeta(dir string, now time.Time, sync bool) (hubMeta, error) {
	path := filepath.Join(dir, "hub.json")
	b, err := os.ReadFile(path)
	if err == nil {
		var m hubMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return hubMeta{}, fmt.Errorf("decode %s: %w", path, err)
		}
		return m, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return hubMeta{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return hubMeta{}, err
	}
	m := hubMeta{CreatedAt: now.UTC().Truncate(time.Millisecond)}
	return m, storeMeta(dir, m, sync)
}

// storeMeta replaces the hub's metadata file by m (written aside, synced
// when sync is set, renamed over).
func storeMeta(dir string, m hubMeta, sync bool) error {
	path := filepath.Join(dir, "hub.json")
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if sync {
		if f, err := os.Open(tmp); err == nil {
			err = f.Sync()
			_ = f.Close()
			if err != nil {
				return fmt.Errorf("sync %s: %w", tmp, err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if sync {
		return durable.SyncDir(dir)
	}
	return nil
}
