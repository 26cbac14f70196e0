//go:build tools

// Package tools pins actionlint's command as a dependency of this module.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
