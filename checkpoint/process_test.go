package checkpoint_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
)

// helperEnv selects a helper mode of the test binary (see TestMain).
const helperEnv = "EHSINK_CHECKPOINT_TEST_HELPER"

// claimResult is what a helper process reports after each round: the
// partitions it won, with their new ETags.
type claimResult struct {
	Won map[string]string `json:"won"`
	Err string            `json:"err,omitempty"`
}

// runHelper is the child side of TestFileStoreClaimRaceProcesses. Per round
// it reads "round", lists the ownerships (so that every process holds the
// same ETags), answers "ready", waits for "go", claims every partition with
// the ETag it read, and prints a claimResult line. It exits on EOF.
func runHelper(mode string) int {
	if mode != "claim" {
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	ctx := context.Background()
	s, err := checkpoint.NewFileStore(os.Getenv("EHSINK_CHECKPOINT_DIR"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	owner := os.Getenv("EHSINK_CHECKPOINT_OWNER")
	partitions := strings.Split(os.Getenv("EHSINK_CHECKPOINT_PARTITIONS"), ",")
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		if in.Text() != "round" {
			fmt.Fprintf(os.Stderr, "unexpected %q\n", in.Text())
			return 2
		}
		list, err := s.ListOwnership(ctx, testNS, testEH, testCG, nil)
		if err != nil {
			_ = out.Encode(claimResult{Err: err.Error()})
			continue
		}
		etags := map[string]*azcore.ETag{}
		for _, o := range list {
			etags[o.PartitionID] = o.ETag
		}
		var claims []azeventhubs.Ownership
		for _, p := range partitions {
			claims = append(claims, ownership(p, owner, etags[p]))
		}
		fmt.Println("ready")
		if !in.Scan() || in.Text() != "go" {
			return 2
		}
		won, err := s.ClaimOwnership(ctx, claims, nil)
		res := claimResult{Won: map[string]string{}}
		if err != nil {
			res.Err = err.Error()
		}
		for _, o := range won {
			res.Won[o.PartitionID] = string(*o.ETag)
		}
		_ = out.Encode(res)
	}
	return 0
}

// helperProc is a running helper process.
type helperProc struct {
	owner string
	stdin io.WriteCloser
	out   *bufio.Reader
}

// TestFileStoreClaimRaceProcesses has several OS processes (this test
// binary in helper mode) race to claim the same partitions of one
// directory, first creating them and then for several rounds with the same
// ETag: exactly one process wins each partition each round, and the stored
// owner and ETag are the winner's.
func TestFileStoreClaimRaceProcesses(t *testing.T) {
	const procs, rounds = 4, 6
	partitions := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	s := newFileStore(t)

	helpers := make([]*helperProc, procs)
	for i := range helpers {
		helpers[i] = startHelper(t, s.Dir(), fmt.Sprintf("proc-%d", i), partitions)
	}
	for round := range rounds {
		for _, h := range helpers {
			fmt.Fprintln(h.stdin, "round")
		}
		for _, h := range helpers {
			if line := h.readLine(t); line != "ready" {
				t.Fatalf("round %d: %s said %q, want ready", round, h.owner, line)
			}
		}
		for _, h := range helpers {
			fmt.Fprintln(h.stdin, "go")
		}
		winners := map[string]string{}
		etags := map[string]*azcore.ETag{}
		for _, h := range helpers {
			var res claimResult
			if err := json.Unmarshal([]byte(h.readLine(t)), &res); err != nil {
				t.Fatalf("round %d: %s: bad result: %v", round, h.owner, err)
			}
			if res.Err != "" {
				t.Fatalf("round %d: %s: %s", round, h.owner, res.Err)
			}
			for p, etag := range res.Won {
				if prev, dup := winners[p]; dup {
					t.Fatalf("round %d: partition %s won by both %s and %s", round, p, prev, h.owner)
				}
				winners[p] = h.owner
				e := azcore.ETag(etag)
				etags[p] = &e
			}
		}
		checkWinners(t, s, round, partitions, winners, etags)
	}
}

func startHelper(t *testing.T, dir, owner string, partitions []string) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		helperEnv+"=claim",
		"EHSINK_CHECKPOINT_DIR="+dir,
		"EHSINK_CHECKPOINT_OWNER="+owner,
		"EHSINK_CHECKPOINT_PARTITIONS="+strings.Join(partitions, ","),
	)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", owner, err)
	}
	t.Cleanup(func() {
		// EOF on stdin ends a helper waiting for its next round; one stuck
		// elsewhere after a failure is killed.
		_ = stdin.Close()
		if t.Failed() {
			_ = cmd.Process.Kill()
		}
		if err := cmd.Wait(); err != nil && !t.Failed() {
			t.Errorf("helper %s: %v", owner, err)
		}
	})
	return &helperProc{owner: owner, stdin: stdin, out: bufio.NewReader(stdout)}
}

func (h *helperProc) readLine(t *testing.T) string {
	t.Helper()
	line, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("helper %s: %v", h.owner, err)
	}
	return strings.TrimSpace(line)
}
