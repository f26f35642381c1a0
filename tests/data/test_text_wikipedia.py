"""Wikipedia markup cleaning (gensim's filter_wiki) and the enwiki-gensim dataset (integration: fetched once)."""

import bz2

import numpy as np
import pytest

from embreg.data import list_datasets, read_wiki_dump
from embreg.data.datasets.wikipedia import clean_wiki_markup
from embreg.errors import DataError

DUMP = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><siteinfo><namespaces>
<namespace key="0" /></namespaces></siteinfo>
<page><title>Alpha</title><ns>0</ns><id>1</id><revision><text>'''Alpha''' is a [[letter|Greek letter]].
{{Infobox|x=1}}
==History==
It came first.&lt;ref&gt;A source&lt;/ref&gt;</text></revision></page>
<page><title>Beta</title><ns>0</ns><id>2</id><revision><text>#REDIRECT [[Alpha]]</text></revision></page>
</mediawiki>
"""


def test_markup_is_removed():
    text = clean_wiki_markup("'''Bold''' and ''it'' [[a|b]] {{cite|x}}\n==Head==\n[[Category:X]]")
    assert "'" not in text and "[" not in text and "{" not in text and "=" not in text
    assert "Bold" in text and "b" in text.split() and "Head" in text


def test_dump_reader_keeps_articles_and_drops_redirects(tmp_path):
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(DUMP.encode()))
    articles = read_wiki_dump(path)
    assert [title for title, _ in articles] == ["Alpha"]
    tokens = articles[0][1]
    assert tokens[:6] == ["Alpha", "is", "a", "Greek", "letter", "."]
    assert "History" in tokens and "source" not in tokens and "Infobox" not in tokens


def test_dump_without_articles_is_an_error(tmp_path):
    path = tmp_path / "empty.xml"
    path.write_text(DUMP.split("<page>")[0] + "</mediawiki>\n")
    with pytest.raises(DataError, match="empty"):
        read_wiki_dump(path)


def test_enwiki_is_registered():
    info = {d.name: d for d in list_datasets()}["enwiki-gensim"]
    assert "gensim" in " ".join(info.sources) and info.files[0].endswith(".bz2")


@pytest.mark.integration
def test_enwiki_splits_by_article_with_unk():
    from embreg.data import load_enwiki

    corpus = load_enwiki(max_vocab=5000)
    summary = corpus.summary()
    assert summary["vocab_size"] == 5000
    assert 300_000 < summary["train"]["tokens"] < 700_000 and summary["valid"]["tokens"] > 10_000
    titles = [set(corpus.articles[s]) for s in ("train", "valid", "test")]
    assert not (titles[0] & titles[1] or titles[0] & titles[2] or titles[1] & titles[2])
    assert 0 < float(np.mean(corpus.splits["valid"] == 0)) < 0.3
