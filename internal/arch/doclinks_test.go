package arch

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// mdLinkRE is an inline Markdown link's target: ](target).
	mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// codeSpanRE is an inline code span, whose text is not a link.
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^#{1,6} (.*)$`)
)

// Every relative link of README.md and docs/*.md leads to a file that
// exists and, with a #fragment into Markdown, to a heading it has (as
// GitHub names headings), so text moved between them keeps its links.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		lines, err := proseLines(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			for _, m := range mdLinkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l.text, ""), -1) {
				if err := checkLink(f, m[1], anchors); err != nil {
					t.Errorf("%s:%d: %v", strings.TrimPrefix(f, "../../"), l.n, err)
				}
			}
		}
	}
}

type line struct {
	n    int
	text string
}

// proseLines are the lines of a Markdown file outside fenced code blocks.
func proseLines(path string) ([]line, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []line
	fenced := false
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line{i + 1, l})
		}
	}
	return out, nil
}

func checkLink(from, target string, anchors map[string]map[string]bool) error {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return nil
	}
	file, frag, _ := strings.Cut(target, "#")
	path := from
	if file != "" {
		path = filepath.Join(filepath.Dir(from), file)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("link %q: %v", target, err)
	}
	if frag == "" || !strings.HasSuffix(path, ".md") {
		return nil
	}
	if anchors[path] == nil {
		a, err := headingAnchors(path)
		if err != nil {
			return err
		}
		anchors[path] = a
	}
	if !anchors[path][frag] {
		return fmt.Errorf("link %q: %s has no heading with anchor %q", target, filepath.Base(path), frag)
	}
	return nil
}

// headingAnchors are the anchors GitHub gives a file's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeated one suffixed
// -1, -2, ….
func headingAnchors(path string) (map[string]bool, error) {
	lines, err := proseLines(path)
	if err != nil {
		return nil, err
	}
	out, seen := map[string]bool{}, map[string]int{}
	for _, l := range lines {
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out, nil
}
