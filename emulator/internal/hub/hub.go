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
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/internal/durable"
)

// Hub is one event hub: a fixed set of partitions and consumer groups.
// It is safe for concurrent use.
type Hub struct {
	ns        *Namespace
	name      string
	createdAt time.Time
	parts     []*partition
	ids       []string
	cgs       map[string]bool // declared consumer groups, "$Default" included; read-only
	rr        atomic.Uint64   // round-robin counter for keyless sends
}

// Name returns the hub's name.
func (h *Hub) Name() string { return h.name }

// CreatedAt returns when the hub was first created. With a DataDir it
// survives restarts.
func (h *Hub) CreatedAt() time.Time { return h.createdAt }

// PartitionIDs returns the partition IDs, "0" to "N-1", in a new slice.
func (h *Hub) PartitionIDs() []string { return slices.Clone(h.ids) }

// PartitionCount returns the number of partitions.
func (h *Hub) PartitionCount() int { return len(h.parts) }

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
	i, err := strconv.Atoi(id)
	if err != nil || i < 0 || i >= len(h.parts) || strconv.Itoa(i) != id {
		return nil, errPartitionOutOfRange(id, len(h.parts))
	}
	return h.parts[i], nil
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
		p = h.parts[fnv1a(*key)%uint32(len(h.parts))]
	default:
		p = h.parts[(h.rr.Add(1)-1)%uint64(len(h.parts))]
	}
	if err := p.append(now.UnixMilli(), key, msgs); err != nil {
		return "", err
	}
	return p.id, nil
}

// PartitionForKey returns the partition Append picks for key when no
// partition ID is given.
func (h *Hub) PartitionForKey(key string) string {
	return h.ids[fnv1a(key)%uint32(len(h.parts))]
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
	b, err = json.Marshal(m)
	if err != nil {
		return hubMeta{}, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return hubMeta{}, err
	}
	if sync {
		if f, err := os.Open(tmp); err == nil {
			err = f.Sync()
			_ = f.Close()
			if err != nil {
				return hubMeta{}, fmt.Errorf("sync %s: %w", tmp, err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return hubMeta{}, err
	}
	if sync {
		if err := durable.SyncDir(dir); err != nil {
			return hubMeta{}, err
		}
	}
	return m, nil
}
