package emulator

// Behavior: the admin HTTP server (Config.AdminAddr), for fault injection
// from outside the process. All endpoints answer JSON.
//
//	GET  /health                                  {"status":"ok","addr":...}
//	POST /faults/detach?hub=H&partition=P          force-detach the partition's receivers
//	POST /faults/server-busy?duration=30s          reject sends with server-busy (0 ends it)
//	POST /faults/latency?duration=200ms            add latency to sends and RPCs (0 ends it)
//	POST /faults/drop-connections                  drop every client connection
//	POST /faults/partition-properties?count=N      fail the next N partition-properties reads with 500
//	POST /hubs/partitions?hub=H&count=N            grow hub H to N partitions (never shrinks)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

func (s *Server) startAdmin(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("emulator: admin listen on %s: %w", s.cfg.AdminAddr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "addr": s.Addr()})
	})
	mux.HandleFunc("POST /faults/detach", func(w http.ResponseWriter, r *http.Request) {
		n := s.ForceDetach(r.URL.Query().Get("hub"), r.URL.Query().Get("partition"))
		writeJSON(w, http.StatusOK, map[string]any{"detached": n})
	})
	mux.HandleFunc("POST /faults/server-busy", func(w http.ResponseWriter, r *http.Request) {
		d, ok := durationParam(w, r)
		if ok {
			s.ServerBusy(d)
			writeJSON(w, http.StatusOK, map[string]any{"server_busy": d.String()})
		}
	})
	mux.HandleFunc("POST /faults/latency", func(w http.ResponseWriter, r *http.Request) {
		d, ok := durationParam(w, r)
		if ok {
			s.SetLatency(d)
			writeJSON(w, http.StatusOK, map[string]any{"latency": d.String()})
		}
	})
	mux.HandleFunc("POST /faults/partition-properties", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("count"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("count: %v", err)})
			return
		}
		s.FailPartitionProperties(n)
		writeJSON(w, http.StatusOK, map[string]any{"fail_partition_properties": n})
	})
	mux.HandleFunc("POST /hubs/partitions", func(w http.ResponseWriter, r *http.Request) {
		hub := r.URL.Query().Get("hub")
		n, err := strconv.Atoi(r.URL.Query().Get("count"))
		if err == nil {
			err = s.AddPartitions(hub, n)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("hub %q, count %q: %v", hub, r.URL.Query().Get("count"), err)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"hub": hub, "partitions": n})
	})
	mux.HandleFunc("POST /faults/drop-connections", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"dropped": s.DropConnections()})
	})
	s.adminLn = ln
	s.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server failed", "err", err)
		}
	}()
	return nil
}

func durationParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	d, err := time.ParseDuration(r.URL.Query().Get("duration"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("duration: %v", err)})
		return 0, false
	}
	return d, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
