"""Adapters that make embreg's regularisers work inside other training loops.

* :mod:`embreg.integrations.hf_trainer`: Hugging Face ``transformers.Trainer`` (needs ``pip install 'embreg[nlp]'``).
"""
