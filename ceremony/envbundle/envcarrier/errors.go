package envcarrier

import (
	"fmt"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Rule names the rule an input broke (docs/env-bundle.md, "Rules").
type Rule string

// The rules. Carrier rules first, then the pack inputs' and the merge
// check's.
const (
	RuleCarrierSize     Rule = "carrier-size"
	RuleUTF8            Rule = "utf-8"
	RuleNUL             Rule = "nul"
	RuleJSON            Rule = "json"
	RuleDuplicateKey    Rule = "duplicate-key"
	RuleShape           Rule = "shape"
	RuleSchema          Rule = "schema"
	RuleEntryCount      Rule = "entry-count"
	RuleName            Rule = "name"
	RuleReservedPrefix  Rule = "reserved-prefix"
	RuleValueSize       Rule = "value-size"
	RuleOrder           Rule = "order"
	RuleDuplicateName   Rule = "duplicate-name"
	RuleNameValueSize   Rule = "name-value-size"
	RuleCanonical       Rule = "canonical"
	RuleDotenv          Rule = "dotenv"
	RuleNamesFile       Rule = "names-file"
	RuleCollision       Rule = "collision"
	RuleMergedEntries   Rule = "merged-entries"
	RuleMergedNameValue Rule = "merged-name-value-size"
)

// Error is a broken rule. It never holds text taken from the input: Where
// is a position ("entries[3]", "line 7", "member[2]", "byte 120" or
// empty) and Msg is written by this package from counts and constants.
type Error struct {
	Rule  Rule
	Where string
	Msg   string
}

func (e *Error) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("environment bundle: %s (rule %s)", e.Msg, e.Rule)
	}
	return fmt.Sprintf("environment bundle: %s: %s (rule %s)", e.Where, e.Msg, e.Rule)
}

// invalid is a fail.Invalid *Error. args must be counts, positions or
// constants, never input text.
func invalid(rule Rule, where, format string, args ...any) error {
	return fail.Wrap(fail.Invalid, &Error{Rule: rule, Where: where, Msg: fmt.Sprintf(format, args...)})
}

// at is the position "byte N" of a byte offset.
func at(off int) string { return fmt.Sprintf("byte %d", off) }
