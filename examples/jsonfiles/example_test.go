package jsonfiles_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ehsink/ehsink/examples/jsonfiles"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// Example drives the custom sink the way the runner does: Open reports the
// watermark, Write buffers, Flush commits and reports the new watermark,
// and a reopened writer resumes after it.
func Example() {
	dir, _ := os.MkdirTemp("", "jsonfiles-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	driver := jsonfiles.Driver{} // what the package registers as "jsonfiles"
	cfg := driver.NewConfig().(*jsonfiles.Config)
	cfg.Dir = dir
	sink, _ := driver.New(ctx, cfg, sinks.Info{Connector: "example"})
	defer sink.Close(ctx)

	w, wm, _ := sink.Open(ctx, "0")
	fmt.Println("watermark before:", wm)
	_ = w.Write(ctx, sinktest.Events("0", 0, 4))
	wm, _ = w.Flush(ctx)
	fmt.Println("committed up to seq", wm.SequenceNumber)
	_ = w.Close(ctx)

	_, wm, _ = sink.Open(ctx, "0")
	fmt.Println("a restart resumes after seq", wm.SequenceNumber)
	files, _ := filepath.Glob(filepath.Join(dir, "0", "*.jsonl"))
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// watermark before: <nil>
	// committed up to seq 4
	// a restart resumes after seq 4
	// 00000000000000000000-00000000000000000004.jsonl
}
