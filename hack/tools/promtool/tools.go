//go:build tools

// Package tools pins the promtool command built by `make tools-monitoring`: deploy/test runs
// `promtool check rules` and `promtool test rules` on the chart's PrometheusRule.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
