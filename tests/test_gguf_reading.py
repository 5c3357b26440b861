"""A GGUF file's first load, read fast (nsample/models/gguf_reading.py): the fast reader reads what gguf-py's own reads,
transformers gets one reader per file within a load and gguf-py's own after it, and what a first load writes is what
transformers makes of the file by itself."""
import threading

import ggml_quantizer as gq
import gguf
import numpy as np
import pytest
import torch
from gguf_fixtures import tiny_gguf_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor, get_gguf_hf_weights_map

from nsample.models import gguf_model
from nsample.models.gguf_reading import FastReader, shared_reading

pytestmark = pytest.mark.skipif(not gq.available(), reason="no llama.cpp quantizer (llama-cpp-python)")


@pytest.fixture(scope="module")
def path():
    return tiny_gguf_file("mix")  # K-quants, Q6_K and F32 tensors, the embedded model's 49k-token vocabulary


def test_the_fast_reader_reads_every_field_and_tensor_as_gguf_py_does(path):
    ours, theirs = FastReader(path), gguf.GGUFReader(path)
    assert list(ours.fields) == list(theirs.fields) and len(theirs.fields["tokenizer.ggml.tokens"].data) == 49152
    for name, field in theirs.fields.items():
        mine = ours.fields[name]
        assert (mine.offset, mine.name, mine.types, mine.data) == (field.offset, field.name, field.types, field.data)
        assert len(mine.parts) == len(field.parts), name
        for a, b in zip(mine.parts, field.parts):
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert mine.contents() == field.contents(), name
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    for a, b in zip(ours.tensors, theirs.tensors):
        assert (a.tensor_type, list(a.shape), a.n_elements, a.n_bytes, a.data_offset) == \
            (b.tensor_type, list(b.shape), b.n_elements, b.n_bytes, b.data_offset), a.name
        assert a.data.dtype == b.data.dtype and np.array_equal(a.data, b.data), a.name


def test_within_a_load_transformers_gets_one_reader_a_file_and_gguf_py_its_own_after(path):
    before = gguf.GGUFReader, gguf.get_tensor_name_map
    with shared_reading() as read:
        first = gguf.GGUFReader(str(path))
        assert isinstance(first, FastReader) and read(path) is first and gguf.GGUFReader(path) is first
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        with shared_reading() as inner:  # nested: the outer block's readers
            assert inner is read and gguf.GGUFReader(path) is first
        assert gguf.GGUFReader(path) is first
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == before
    with pytest.raises(RuntimeError), shared_reading():
        raise RuntimeError("a load that fails")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == before


def test_another_threads_load_waits_for_the_block_and_reads_with_gguf_py_after_it(path):
    seen, entered = [], threading.Event()

    def other():
        entered.wait()
        with shared_reading():
            seen.append(type(gguf.GGUFReader(path)))
        seen.append(gguf.GGUFReader)

    thread = threading.Thread(target=other)
    thread.start()
    with shared_reading():
        entered.set()
        thread.join(0.5)
        assert thread.is_alive() and not seen  # blocked on the first block
    thread.join(30)
    assert seen == [FastReader, gguf.GGUFReader]


def test_a_first_load_writes_the_config_tokenizer_and_names_transformers_makes_of_the_file(path, tmp_path):
    meta = gguf_model.metadata(path, tmp_path)
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    mine = AutoConfig.from_pretrained(meta)
    assert {**mine.to_dict(), "_name_or_path": None} == {**config.to_dict(), "_name_or_path": None}
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    cached = AutoTokenizer.from_pretrained(meta)
    assert cached.get_vocab() == tokenizer.get_vocab() and cached.chat_template == tokenizer.chat_template
    text = "Hello, wörld! 12345 <|im_start|>user\n  tabs\tand spaces"
    assert cached(text).input_ids == tokenizer(text).input_ids
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(mine)
    processor = LlamaTensorProcessor(config=mine.to_dict())
    assert gguf_model.weights_map(model, processor) == get_gguf_hf_weights_map(model, processor)
