package ops

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ehsink/ehsink/internal/deadletters"
)

// replayRequest is the body of the replay action: the filters of `ehsink
// deadletters replay`. No body, or {}, replays every letter not replayed.
type replayRequest struct {
	// Reason selects letters whose reason contains it.
	Reason string `json:"reason"`
	// Since selects letters that failed since then: an RFC 3339 time, or
	// a duration back from now (24h).
	Since string `json:"since"`
	// IDs selects those letters only.
	IDs []int64 `json:"ids"`
	// DryRun reports what would happen and writes nothing.
	DryRun bool `json:"dry_run"`
}

// replay serves POST /v1/connectors/{name}/deadletters/replay: the
// connector's letters replayed through its running sink, answered with
// the outcome's tally (connector.ReplayResult). The replay runs within the
// request: a caller that goes away stops it between two letters, and what
// was committed stays (each letter is marked in the commit of its rows).
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	// Unknown fields are refused: a misspelt filter would replay every
	// letter.
	var req replayRequest
	err := decodeBody(r, &req, `{"reason", "since", "ids", "dry_run"}`)
	if err != nil {
		writeMessage(w, http.StatusBadRequest, err.Error())
		return
	}
	f := deadletters.Filter{Reason: req.Reason}
	if req.Since != "" {
		if f.Since, err = deadletters.ParseSince(req.Since, time.Now()); err != nil {
			writeMessage(w, http.StatusBadRequest, "request body: since: "+err.Error())
			return
		}
	}
	for i, id := range req.IDs {
		if id <= 0 {
			writeMessage(w, http.StatusBadRequest, fmt.Sprintf("request body: ids[%d]: %d: want a positive integer", i, id))
			return
		}
	}
	res, err := s.opts.Control.ReplayDeadLetters(r.Context(), r.PathValue("name"), f, req.IDs, req.DryRun)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
