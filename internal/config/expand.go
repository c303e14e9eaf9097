package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Expand returns a copy of raw in which every string value has ${VAR} and
// ${VAR:-default} replaced using getenv, and $$ replaced by $. Maps and
// slices are copied; other values are returned as they are. A variable that
// getenv reports as empty counts as unset: ${VAR} is then an error naming
// the variable and the value's path, and ${VAR:-default} gives the default
// (itself expanded, so ${A:-${B}} works; ${VAR:-} gives ""). Every problem
// is reported, as [*Error] values joined with [errors.Join].
func Expand(raw any, getenv func(string) string) (any, error) {
	var errs []error
	out := expandTree("", raw, getenv, &errs)
	return out, errors.Join(errs...)
}

func expandTree(path string, raw any, getenv func(string) string, errs *[]error) any {
	switch x := raw.(type) {
	case string:
		s, err := ExpandString(x, getenv)
		if err != nil {
			*errs = append(*errs, &Error{Path: path, Err: err})
			return x
		}
		return s
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			out[k] = expandTree(JoinPath(path, keyPath(k)), x[k], getenv, errs)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = expandTree(path+"["+strconv.Itoa(i)+"]", v, getenv, errs)
		}
		return out
	}
	return raw
}

// ExpandString expands ${VAR}, ${VAR:-default} and $$ in one string, as
// [Expand] does. Errors name the variable, never the value.
func ExpandString(s string, getenv func(string) string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	var errs []error
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte(c) // a lone $, as in $Default or $.order_id
			i++
			continue
		}
		end := matchingBrace(s, i+1)
		if end < 0 {
			errs = append(errs, errors.New("unterminated ${ (write $$ for a literal $)"))
			b.WriteString(s[i:])
			break
		}
		body := s[i+2 : end]
		i = end + 1
		name, def, hasDef := strings.Cut(body, ":-")
		if !validVarName(name) {
			errs = append(errs, fmt.Errorf("invalid variable name %q in ${...} (write $$ for a literal $)", name))
			continue
		}
		if v := getenv(name); v != "" {
			b.WriteString(v)
			continue
		}
		if !hasDef {
			errs = append(errs, &UnsetError{Name: name})
			continue
		}
		v, err := ExpandString(def, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.WriteString(v)
	}
	if len(errs) > 0 {
		return s, errors.Join(errs...)
	}
	return b.String(), nil
}

// matchingBrace returns the index of the } closing the { at open, counting
// nested ${...}, or -1.
func matchingBrace(s string, open int) int {
	depth := 0
	for j := open; j < len(s); j++ {
		switch s[j] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// UnsetError is the problem of a ${VAR} reference to a variable that is not
// set (or empty) and has no default. The value it was in stays unexpanded,
// so a caller drops the other complaints about that value (they follow
// from this one).
type UnsetError struct {
	// Name is the variable's name.
	Name string
}

// Error returns "environment variable NAME is not set (or empty); ...".
func (e *UnsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set (or empty); set it, or write ${%s:-default}", e.Name, e.Name)
}
