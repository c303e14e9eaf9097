package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/ops"
)

// opsServer serves the operations API on addr until stop is called. It
// returns the connector metrics to record into; /metrics serves them with
// the Go runtime's and the lag and state computed from control.
func opsServer(addr string, spec *connector.HTTPSpec, control *connector.Control, log *slog.Logger) (*connector.Metrics, func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), ops.NewCollector(control))
	met, err := connector.NewMetrics(reg)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	token, err := spec.OpsToken()
	if err != nil {
		return nil, nil, fmt.Errorf("http: %w", err)
	}
	srv, err := ops.Serve(addr, ops.Options{Control: control, Gatherer: reg, Pprof: spec != nil && spec.Pprof, Token: token, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return met, stop, nil
}
