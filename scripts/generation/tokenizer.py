"""The Jane Austen corpus and the shared sentencepiece tokenizer of the generation models.

Corpus: the six novels of r-cran-janeaustenr (austen.py), re-flowed into paragraphs (the R data
keeps the printed line breaks; a paragraph becomes one line, paragraphs are separated by "\\n").
The last HELD_OUT fraction of each novel's paragraphs is held out from training.

Tokenizer: Llama-style sentencepiece BPE (unk 0, bos 1, eos 2, no pad; byte fallback so any UTF-8
input encodes; identity normalization so "\\n" and runs of spaces survive as byte pieces),
VOCAB_SIZE pieces, trained with the sentencepiece Python module. Random-weight models with a
larger vocabulary get the same tokenizer padded with never-produced pieces (with_vocab_size).
"""
import os
import re

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

import austen

VOCAB_SIZE = 2048
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
HELD_OUT = 0.05


def paragraphs(text):
    paras = []
    for block in re.split(r"\n\s*\n", text):
        p = " ".join(line.strip() for line in block.splitlines() if line.strip())
        if p:
            paras.append(p)
    return paras


def corpus():
    """(train paragraphs, held-out paragraphs), novels in a fixed order."""
    novels = austen.load_novels()
    train, held = [], []
    for name in austen.NOVELS:
        paras = paragraphs(novels[name])
        cut = int(len(paras) * (1 - HELD_OUT))
        train += paras[:cut]
        held += paras[cut:]
    return train, held


def shared_tokenizer(folder):
    """Trains (once) and returns the path of folder/tokenizer.model."""
    path = os.path.join(folder, "tokenizer.model")
    if os.path.isfile(path):
        return path
    os.makedirs(folder, exist_ok=True)
    train, _ = corpus()
    text_path = os.path.join(folder, "train.txt")
    with open(text_path, "w") as f:
        f.write("\n".join(train) + "\n")
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=os.path.join(folder, "tmp"), vocab_size=VOCAB_SIZE,
        model_type="bpe", character_coverage=1.0, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, max_sentence_length=1 << 16, num_threads=2,
        unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1, minloglevel=2)
    os.replace(os.path.join(folder, "tmp.model"), path)
    os.remove(os.path.join(folder, "tmp.vocab"))
    return path


def with_vocab_size(path, vocab_size):
    """The serialized tokenizer at path, padded to vocab_size pieces with UNUSED pieces
    "<unused_N>" (never produced by Encode; Decode renders them as their piece text)."""
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    n = len(proto.pieces)
    if vocab_size < n:
        raise ValueError("vocab_size %d is below the tokenizer's %d pieces" % (vocab_size, n))
    for i in range(vocab_size - n):
        piece = proto.pieces.add()
        piece.piece = "<unused_%d>" % i
        piece.score = -1e9
        piece.type = sentencepiece_model_pb2.ModelProto.SentencePiece.UNUSED
    proto.trainer_spec.vocab_size = vocab_size
    return proto.SerializeToString()
