package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func TestRunEmulatorServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runEmulator(ctx, []string{"--listen", "127.0.0.1:0", "--hub", "orders=3", "--hub", "pay=1", "--consumer-group", "audit", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the connection string: %v (stderr: %s)", err, stderr.String())
	}
	cs := strings.TrimSpace(line)
	if !strings.Contains(cs, "EntityPath=orders") || !strings.Contains(cs, "UseDevelopmentEmulator=true") {
		t.Fatalf("first line = %q", cs)
	}
	go io.Copy(io.Discard, pr)
	pc, err := azeventhubs.NewProducerClientFromConnectionString(cs, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	props, err := pc.GetEventHubProperties(rctx, nil)
	if err != nil || len(props.PartitionIDs) != 3 {
		t.Fatalf("GetEventHubProperties = %+v, %v", props, err)
	}
	pc.Close(rctx)
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit code %d, stderr: %s", c, stderr.String())
	}
}

func TestRunEmulatorUsage(t *testing.T) {
	for _, args := range [][]string{{"--hub", "orders"}, {"--hub", "orders=0"}, {"--key", "x"}, {"extra"}, {"--bogus"}, {"--fsync", "sometimes"}} {
		var out, errOut bytes.Buffer
		if c := runEmulator(context.Background(), args, &out, &errOut); c != exitUsage {
			t.Errorf("runEmulator(%q) = %d, want %d", args, c, exitUsage)
		}
	}
	var out, errOut bytes.Buffer
	if c := runEmulator(context.Background(), []string{"--help"}, &out, &errOut); c != exitOK || !strings.Contains(errOut.String(), "--hub") {
		t.Errorf("--help = %d, output %q", c, errOut.String())
	}
}
