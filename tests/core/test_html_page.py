"""The self-contained report page (badpo.core.html_page): the Markdown subset the reports write,
worked out by hand; every text escaped; plots embedded; nothing that runs or fetches."""

from __future__ import annotations

import base64

from badpo.core.html_page import html_image, html_page, html_pre, html_table, markdown_html


def test_the_markdown_subset_by_hand():
    text = ("# Title\n\nA **bold** and `a<b` line\ncontinued.\n\n- one\n  more\n- two\n\n"
            "| run | rate |\n|:--|--:|\n| DPO | 0.700 |\n\n```\nx < y\n```\n")
    assert markdown_html(text) == (
        "<h2>Title</h2>\n<p>A <strong>bold</strong> and <code>a&lt;b</code> line continued.</p>\n"
        "<ul><li>one more</li><li>two</li></ul>\n"
        '<div class="scroll"><table><thead><tr><th>run</th><th>rate</th></tr></thead><tbody><tr><td>DPO</td>'
        '<td class="num">0.700</td></tr></tbody></table></div>\n<pre>x &lt; y</pre>')


def test_text_is_escaped_and_nothing_runs_or_is_fetched(tmp_path):
    hostile = '<script>alert(1)</script><img src="https://example.org/x.png">'
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    page = html_page(hostile, [markdown_html(hostile), html_pre(hostile), html_table([hostile], [[hostile]]),
                               html_image(png, hostile)], meta=hostile)
    assert "<script" not in page and "<img src=" not in page.replace('<img alt="', "")  # escaped, not an element
    assert not any(f'{attribute}="http' in page for attribute in ("src", "href")) and "url(" not in page
    assert f'src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}"' in page
    assert page.startswith("<!DOCTYPE html>") and 'name="viewport"' in page and "@media print" in page


def test_numbers_align_right_and_text_does_not():
    table = html_table(["a", "b", "c"], [["+0.250", "12%", "ann1"]], table_id="t")
    assert '<table id="t">' in table
    assert '<td class="num">+0.250</td><td class="num">12%</td><td>ann1</td>' in table
