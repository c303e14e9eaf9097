package deploy_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
	line int
}

// stage is one FROM and the instructions after it.
type stage struct {
	from, name string
	body       []instruction
}

// parseDockerfile reads the instructions of a Dockerfile into stages. It
// knows what this repository's Dockerfile uses: comments, backslash
// continuations, `FROM image AS name`.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages []stage
		buf    strings.Builder
		start  int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if buf.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if buf.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			buf.WriteString(cont + " ")
			continue
		}
		buf.WriteString(line)
		cmd, args, _ := strings.Cut(buf.String(), " ")
		buf.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			st := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// goDirective returns the go version in root's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	return string(m[1])
}

// TestDockerfile checks what the image promises without a container
// engine: the build stage runs the Makefile's build-static target with the
// Go of go.mod, and the final image is distroless/static or scratch, runs as
// a non-root user by number, and needs no shell (exec-form entrypoint, no
// RUN).
func TestDockerfile(t *testing.T) {
	path := filepath.Join(root, "Dockerfile")
	stages := parseDockerfile(t, path)
	if len(stages) < 2 {
		t.Fatalf("%s: %d stages, want a build stage and a final one", path, len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	if want := "golang:" + goDirective(t); !strings.HasPrefix(build.from, want) {
		t.Errorf("build stage FROM %s, want %s (the go directive of go.mod)", build.from, want)
	}
	var makes []string
	for _, in := range build.body {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			t.Errorf("Dockerfile:%d: the build stage runs go build itself; it must run `make build-static`, which CI runs too", in.line)
		}
		if in.cmd == "RUN" && strings.HasPrefix(in.args, "make ") {
			makes = append(makes, strings.Fields(in.args)[1])
		}
	}
	if !slices.Equal(makes, []string{"build-static"}) {
		t.Errorf("build stage runs make targets %q, want exactly [build-static]", makes)
	}

	if !strings.HasPrefix(final.from, "gcr.io/distroless/static") && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static* or scratch", final.from)
	}
	var user string
	var entrypoint, cmd []string
	for _, in := range final.body {
		switch in.cmd {
		case "RUN":
			t.Errorf("Dockerfile:%d: RUN in the final stage needs a shell, which the image must not need", in.line)
		case "COPY":
			if !strings.Contains(in.args, "--from="+build.name) {
				t.Errorf("Dockerfile:%d: COPY %s: the final stage takes files only from the build stage", in.line, in.args)
			}
		case "USER":
			user = in.args
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(in.args), &v); err != nil {
				t.Errorf("Dockerfile:%d: %s %s: not the exec (JSON) form, which would need /bin/sh", in.line, in.cmd, in.args)
			}
			if in.cmd == "ENTRYPOINT" {
				entrypoint = v
			} else {
				cmd = v
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		t.Errorf("USER %q: want a numeric non-zero user, so runAsNonRoot can check it", user)
	}
	if len(entrypoint) != 1 || filepath.Base(entrypoint[0]) != "ehsink" {
		t.Errorf("ENTRYPOINT %q, want the ehsink binary alone", entrypoint)
	}
	if len(cmd) == 0 || cmd[0] != "run" {
		t.Errorf("CMD %q, want `run` with its flags", cmd)
	}
}

// TestMakeTestBuildsStatic checks that `make test`, which CI runs, runs the
// container's build step: a break in it fails CI, not only `make image`.
func TestMakeTestBuildsStatic(t *testing.T) {
	out, err := exec.Command("make", "--no-print-directory", "-C", root, "-n", "-p", "test").CombinedOutput()
	if err != nil {
		// -n -p prints the rule database even when a recipe would fail.
		t.Logf("make -n -p test: %v", err)
	}
	m := regexp.MustCompile(`(?m)^test: (.*)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("make -p: no rule for test:\n%s", out)
	}
	if !slices.Contains(strings.Fields(string(m[1])), "build-static") {
		t.Errorf("make test prerequisites %q do not include build-static", m[1])
	}
}

// TestStaticBinary checks the binary `make build-static` made: no dynamic
// loader (it must start on an image with no libc) and it runs.
func TestStaticBinary(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a program interpreter: dynamically linked", binary)
		}
	}
	out, err := exec.Command(binary, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ehsink ") {
		t.Errorf("ehsink version: %v\n%s", err, out)
	}
}
