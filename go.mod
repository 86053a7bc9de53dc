module github.com/evener-dev/evener-mcp

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/lmittmann/tint v1.2.1
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)
