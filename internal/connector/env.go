package connector

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/knadh/koanf/providers/env/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ehsink/ehsink/internal/config"
)

// envPrefix starts every environment override; see the package doc.
const envPrefix = "EHSINK_"

// applyEnv applies the EHSINK_ overrides found in environ to raw, in the
// order of their names, and returns a problem per override it could not
// apply. Variables whose first segment is not a top-level key of
// connectors.yaml (EHSINK_TEST_POSTGRES_DSN, EHSINK_LOG_LEVEL) are ignored.
func applyEnv(raw map[string]any, environ func() []string) []error {
	vars, err := env.Provider("", env.Opt{Prefix: envPrefix, EnvironFunc: environ}).Read()
	if err != nil {
		return []error{fmt.Errorf("read %s environment overrides: %w", envPrefix, err)}
	}
	top := topLevelKeys()
	var errs []error
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range vars {
			if !yield(k) {
				return
			}
		}
	}) {
		segs := strings.Split(strings.TrimPrefix(name, envPrefix), "__")
		if !slices.Contains(top, normKey(segs[0])) {
			continue
		}
		value, _ := vars[name].(string)
		if err := applyOverride(raw, segs, value); err != nil {
			errs = append(errs, &config.Error{Path: name, Err: err})
		}
	}
	return errs
}

// topLevelKeys lists the yaml keys of Config.
func topLevelKeys() []string {
	t := reflect.TypeFor[Config]()
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// normKey is how override segments and keys are compared: lower case, with
// - and . read as _ (environment variable names cannot hold them).
func normKey(s string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(s))
}

// applyOverride sets the value at segs in raw, creating maps on the way
// (and the connectors list, when the file has none).
func applyOverride(raw map[string]any, segs []string, value string) error {
	v, err := parseEnvValue(value)
	if err != nil {
		return err
	}
	if normKey(segs[0]) == "connectors" && raw["connectors"] == nil && len(segs) > 1 {
		raw["connectors"] = []any{}
	}
	_, err = setPath(raw, segs, v, "")
	return err
}

// setPath sets v at segs below node and returns the node to store in its
// parent (a new one where there was none, or a list that grew).
func setPath(node any, segs []string, v any, path string) (any, error) {
	if len(segs) == 0 {
		return v, nil
	}
	seg := segs[0]
	if seg == "" {
		return nil, fmt.Errorf("empty segment (two __ in a row, or a trailing __)")
	}
	switch n := node.(type) {
	case map[string]any:
		key := strings.ToLower(seg)
		for k := range n {
			if normKey(k) == normKey(seg) {
				key = k
				break
			}
		}
		child, err := setPath(n[key], segs[1:], v, config.JoinPath(path, key))
		if err != nil {
			return nil, err
		}
		n[key] = child
		return n, nil
	case []any:
		idx, err := listIndex(n, seg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if idx == len(n) {
			n = append(n, map[string]any{})
		}
		child, err := setPath(n[idx], segs[1:], v, fmt.Sprintf("%s[%d]", path, idx))
		if err != nil {
			return nil, err
		}
		n[idx] = child
		return n, nil
	default:
		// Nothing there, or a scalar: the override makes a map of it.
		return setPath(map[string]any{}, segs, v, path)
	}
}

// listIndex finds a list item by index (len(l) appends one) or, for a list
// of maps, by the normalized value of its `name` key.
func listIndex(l []any, seg string) (int, error) {
	if n, err := strconv.Atoi(seg); err == nil {
		if n < 0 || n > len(l) {
			return 0, fmt.Errorf("no item %d (the list has %d)", n, len(l))
		}
		return n, nil
	}
	var names []string
	for i, item := range l {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, ok := m["name"].(string)
		if !ok {
			continue
		}
		if normKey(name) == normKey(seg) {
			return i, nil
		}
		names = append(names, name)
	}
	return 0, fmt.Errorf("no item named %q (names: %s; or use an index)", strings.ToLower(seg), strings.Join(names, ", "))
}

// parseEnvValue reads an override's value: a YAML flow list or map when it
// starts with [ or {, else the string as it is (the decoder parses numbers,
// booleans and durations from strings).
func parseEnvValue(s string) (any, error) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "[") && !strings.HasPrefix(t, "{") {
		return s, nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(t), &v); err != nil {
		return nil, fmt.Errorf("value starts with %c but is not a YAML flow list or map", t[0])
	}
	return v, nil
}
