package egress

// baseline is the embedded allowlist every session starts from: well-known
// source hosting and LLM model providers, nothing else.
//
// Rule for editing this list: it names NO package-registry host of any
// ecosystem (language package indexes, module proxies, artifact repositories,
// container image registries, and the CDNs or "packages" subdomains behind
// them). A registry is a place to fetch and run arbitrary third-party code and
// to publish to; which ones a project may reach is the user's decision, so
// users add them with --allow-domain or allow_domains in their config. For the
// same reason no wildcard here may cover a registry's front-end host, which is
// why GitHub is listed name by name rather than as a wildcard over its domain.
// (Two limits of a host-level list: the githubusercontent.com wildcard also
// covers the storage hosts where GitHub's package service keeps blobs, which
// are reached only through signed links its front-ends hand out; and GitLab
// and Codeberg serve their package APIs under paths of the same host as their
// git service.)
//
// Entries without a port allow 80 and 443 only; the ":22" entries are git over
// SSH (GIT_SSH_COMMAND routes it through the SOCKS proxy). Every entry must
// pass ParsePattern; TestBaselineParses checks that.
var baseline = []string{
	// GitHub
	"github.com",
	"github.com:22",
	"ssh.github.com", // git over SSH on port 443
	"api.github.com",
	"codeload.github.com",
	"uploads.github.com",
	"gist.github.com",
	"*.githubusercontent.com", // raw, objects, avatars, release assets
	// GitLab
	"gitlab.com",
	"gitlab.com:22",
	"altssh.gitlab.com", // git over SSH on port 443
	// Bitbucket
	"bitbucket.org",
	"bitbucket.org:22",
	"api.bitbucket.org",
	// Other public source hosts
	"codeberg.org",
	"codeberg.org:22",
	"git.sr.ht",
	"git.sr.ht:22",
	"dev.azure.com",
	"ssh.dev.azure.com:22",
	"git.kernel.org",

	// Model providers
	"api.anthropic.com",
	"api.openai.com",
	"generativelanguage.googleapis.com",
	"aiplatform.googleapis.com",
	"bedrock.*.amazonaws.com",
	"bedrock-runtime.*.amazonaws.com",
	"*.openai.azure.com",
	"api.mistral.ai",
	"api.cohere.com",
	"api.cohere.ai",
	"api.groq.com",
	"api.deepseek.com",
	"api.together.xyz",
	"api.fireworks.ai",
	"api.x.ai",
	"openrouter.ai",
}
