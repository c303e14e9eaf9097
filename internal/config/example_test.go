package config_test

import (
	"fmt"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
)

// A custom sink's config: a struct with yaml tags, made with its defaults
// by the driver's NewConfig, then decoded from the connector's sink block.
func ExampleDecode() {
	type webhookConfig struct {
		URL      string          `yaml:"url"`
		Token    secret.String   `yaml:"token"`
		Timeout  time.Duration   `yaml:"timeout"`
		MaxBody  config.ByteSize `yaml:"max_body"`
		Headers  map[string]string
		Statuses []int `yaml:"retry_statuses"`
	}
	cfg := &webhookConfig{Timeout: 10 * time.Second}
	raw := map[string]any{ // what koanf loads from YAML
		"url":            "https://example.com/hook",
		"token":          "s3cret",
		"max_body":       "1MiB",
		"retry_statuses": []any{429, 503},
	}
	if err := config.Decode(raw, cfg); err != nil {
		fmt.Println(err)
	}
	fmt.Println(cfg.URL, cfg.Token, cfg.Timeout, cfg.MaxBody, cfg.Statuses)

	// Every problem is reported, each with its path.
	err := config.Decode(map[string]any{"timout": "5s", "max_body": "lots", "retry_statuses": []any{429, "x"}}, cfg)
	for _, e := range config.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// https://example.com/hook *** 10s 1MiB [429 503]
	// max_body: "lots" is not a size: write a number of bytes with an optional unit, e.g. 64MiB or 10MB
	// retry_statuses[1]: expected an integer, got the string "x"
	// timout: unknown key (did you mean timeout?)
}

func ExampleExpand() {
	env := map[string]string{"PG_HOST": "db"}
	raw := map[string]any{
		"dsn":            "postgres://${PG_HOST}:${PG_PORT:-5432}/app",
		"consumer_group": "$Default",
		"price":          "$$5",
		"token":          "${API_TOKEN}",
	}
	out, err := config.Expand(raw, func(k string) string { return env[k] })
	fmt.Println(out.(map[string]any)["dsn"], out.(map[string]any)["consumer_group"], out.(map[string]any)["price"])
	fmt.Println(err)
	// Output:
	// postgres://db:5432/app $Default $5
	// token: environment variable API_TOKEN is not set (or empty); set it, or write ${API_TOKEN:-default}
}
