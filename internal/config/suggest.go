package config

import (
	"errors"
	"fmt"
	"strings"
)

// UnknownKeyError is the problem of a key that names no field, with the
// known key it is likely a typo of. A validator that finds that key
// missing says the same thing again: a caller that runs one after the
// decoder can drop it (connector.Load does).
type UnknownKeyError struct {
	// Suggestion is the closest known key.
	Suggestion string
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("unknown key (did you mean %s?)", e.Suggestion)
}

// unknownKey builds the error for a key that names no field, suggesting the
// closest known key, or listing them all when none is close.
func unknownKey(key string, known []string) error {
	if s := Suggest(key, known); s != "" {
		return &UnknownKeyError{Suggestion: s}
	}
	if len(known) == 0 {
		return errors.New("unknown key (no keys are allowed here)")
	}
	return fmt.Errorf("unknown key (known keys: %s)", strings.Join(known, ", "))
}

// OneOf checks that v is one of allowed; the error lists them and suggests
// the closest when v looks like a typo of one. Validators use it for enum
// values.
func OneOf(v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	if s := Suggest(v, allowed); s != "" {
		return fmt.Errorf("%s: must be one of %s (did you mean %s?)", Quote(v), strings.Join(allowed, ", "), s)
	}
	return fmt.Errorf("%s: must be one of %s", Quote(v), strings.Join(allowed, ", "))
}

// Suggest returns the candidate closest to word by edit distance (with
// transpositions, case-insensitive), or "" if none is close enough to be a
// likely typo: at most a third of the word's length (but at least one edit,
// and at most three). Validators use it for enum values and names.
func Suggest(word string, candidates []string) string {
	best, bestDist := "", -1
	w := strings.ToLower(word)
	for _, c := range candidates {
		d := editDistance(w, strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := max(1, min(3, len([]rune(word))/3))
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
