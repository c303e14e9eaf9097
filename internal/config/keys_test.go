package config_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
)

type keysInner struct {
	Wait time.Duration `yaml:"wait"`
	Size config.ByteSize
}

type keysShared struct {
	Shared string `yaml:"shared"`
}

type keysRoute struct {
	When  string      `yaml:"when"`
	Names []string    `yaml:"names"`
	Sub   []keysRoute `yaml:"sub"`
}

type keysRoot struct {
	keysShared
	Name     string            `yaml:"name"`
	Skipped  string            `yaml:"-"`
	Section  *keysInner        `yaml:"section"`
	Inner    keysInner         `yaml:"inner"`
	Routes   []keysRoute       `yaml:"routes"`
	Hubs     map[string]int    `yaml:"hubs"`
	Empty    struct{}          `yaml:"empty"`
	Any      any               `yaml:"any"`
	Labels   map[string]string `yaml:"labels"`
	internal int
}

func TestKeyPaths(t *testing.T) {
	got := config.KeyPaths(reflect.TypeFor[keysRoot]())
	want := []string{
		"any", "empty", "hubs", "inner.size", "inner.wait", "labels", "name",
		"routes[].names", "routes[].sub", "routes[].when",
		"section", "section.size", "section.wait", "shared",
	}
	if !slices.Equal(got, want) {
		t.Errorf("KeyPaths:\n got %q\nwant %q", got, want)
	}
	var r keysRoot
	_ = r.internal
}
