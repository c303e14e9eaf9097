package connector

import (
	"fmt"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
)

// varSafeYAML is the koanf YAML parser, made to accept ${VAR} references
// anywhere a value can be written, including YAML flow style, where braces
// are syntax: `blob: {connection: ${STORAGE_CONNECTION}, container: c}`.
// Before parsing, each ${...} (on one line, braces balanced) is replaced by
// a plain token; after parsing, the tokens in keys and values are replaced by
// the original text, which Load expands later like any other ${VAR}. $$ is
// left alone, so $${X} stays a literal.
type varSafeYAML struct{}

// tokenPrefix starts the stand-in tokens; a file that already contains it
// is parsed as it is.
const tokenPrefix = "ehsinkvar__"

func (varSafeYAML) Unmarshal(b []byte) (map[string]any, error) {
	src := string(b)
	if strings.Contains(src, tokenPrefix) || !strings.Contains(src, "${") {
		return yaml.Parser().Unmarshal(b)
	}
	var out strings.Builder
	var refs []string
	for i := 0; i < len(src); {
		if src[i] == '$' && i+1 < len(src) && src[i+1] == '$' {
			out.WriteString("$$")
			i += 2
			continue
		}
		if src[i] == '$' && i+1 < len(src) && src[i+1] == '{' {
			if end := closingBrace(src, i+1); end > 0 {
				out.WriteString(fmt.Sprintf("%s%d__", tokenPrefix, len(refs)))
				refs = append(refs, src[i:end+1])
				i = end + 1
				continue
			}
		}
		out.WriteByte(src[i])
		i++
	}
	m, err := yaml.Parser().Unmarshal([]byte(out.String()))
	if err != nil {
		return nil, err
	}
	restore := func(s string) string {
		if !strings.Contains(s, tokenPrefix) {
			return s
		}
		for i := len(refs) - 1; i >= 0; i-- { // 10 before 1
			s = strings.ReplaceAll(s, fmt.Sprintf("%s%d__", tokenPrefix, i), refs[i])
		}
		return s
	}
	return restoreTree(m, restore).(map[string]any), nil
}

// Marshal is the YAML parser's.
func (varSafeYAML) Marshal(m map[string]any) ([]byte, error) { return yaml.Parser().Marshal(m) }

// closingBrace returns the index of the } that closes the { at open, on the
// same line, or -1.
func closingBrace(s string, open int) int {
	depth := 0
	for j := open; j < len(s) && s[j] != '\n'; j++ {
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

// restoreTree applies f to every string key and value of a parsed tree.
func restoreTree(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[f(k)] = restoreTree(val, f)
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(x))
		for k, val := range x {
			if ks, ok := k.(string); ok {
				k = f(ks)
			}
			out[k] = restoreTree(val, f)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = restoreTree(val, f)
		}
		return out
	}
	return v
}
