package emulator

// Behavior: the $management node.
//
// Same request/response pattern as $cbs. Only operation "READ" is served:
//   - type "com.microsoft:eventhub", name = hub: 200 with an amqp-value map
//     name (string), created_at (timestamp), partition_ids (array of
//     string), partition_count (int), georeplication_factor (int, always
//     1), type.
//   - type "com.microsoft:partition", name = hub, partition = id: 200 with
//     name, partition, begin_sequence_number (long),
//     last_enqueued_sequence_number (long, -1 when empty),
//     last_enqueued_offset (string, "-1" when empty),
//     last_enqueued_time_utc (timestamp), is_partition_empty (bool).
//
// Server.FailPartitionProperties makes the next partition READs answer 500.
//
// Unknown hubs and partitions answer 404 (fatal for the SDK; 400 would
// make it reconnect in a loop). Other operations answer 400.

import (
	"errors"

	goamqp "github.com/Azure/go-amqp"

	"github.com/ehsink/ehsink/emulator/internal/hub"
)

func (s *Server) handleManagement(l *link, req *goamqp.Message) rpcResponse {
	props := req.ApplicationProperties
	op, _ := props["operation"].(string)
	typ, _ := props["type"].(string)
	name, _ := props["name"].(string)
	if op != "READ" {
		return rpcResponse{status: 400, desc: "unsupported $management operation '" + op + "'"}
	}
	if reason := s.authorizeManagement(l.s.c, name, props); reason != "" {
		return rpcResponse{status: 401, desc: reason}
	}
	h, err := s.ns.Hub(name)
	if err != nil {
		return rpcResponse{status: 404, desc: errDescription(err)}
	}
	switch typ {
	case "com.microsoft:eventhub":
		ids := h.PartitionIDs()
		return rpcResponse{status: 200, desc: "OK", body: map[string]any{
			"name":                  h.Name(),
			"type":                  typ,
			"created_at":            h.CreatedAt(),
			"partition_ids":         ids,
			"partition_count":       int32(len(ids)),
			"georeplication_factor": int32(1),
		}}
	case "com.microsoft:partition":
		id, _ := props["partition"].(string)
		if s.takePropsFault() {
			return rpcResponse{status: 500, desc: "injected failure of the partition properties (fault injection)"}
		}
		pp, err := h.PartitionProperties(id)
		if err != nil {
			return rpcResponse{status: 404, desc: errDescription(err)}
		}
		return rpcResponse{status: 200, desc: "OK", body: map[string]any{
			"name":                          h.Name(),
			"type":                          typ,
			"partition":                     id,
			"begin_sequence_number":         pp.BeginSequenceNumber,
			"last_enqueued_sequence_number": pp.LastEnqueuedSequenceNumber,
			"last_enqueued_offset":          pp.LastEnqueuedOffset,
			"last_enqueued_time_utc":        pp.LastEnqueuedTime,
			"is_partition_empty":            pp.IsEmpty,
		}}
	}
	return rpcResponse{status: 400, desc: "unsupported $management type '" + typ + "'"}
}

func errDescription(err error) string {
	var he *hub.Error
	if errors.As(err, &he) {
		return he.Description
	}
	return err.Error()
}

// takePropsFault uses one of the partition-properties failures asked for
// with FailPartitionProperties, if any is left.
func (s *Server) takePropsFault() bool {
	for {
		n := s.failProps.Load()
		if n <= 0 {
			return false
		}
		if s.failProps.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
