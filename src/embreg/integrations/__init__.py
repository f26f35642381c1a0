"""Adapters to other libraries: training loops (Hugging Face) and model-parallel embedding runtimes (TorchRec).

* :mod:`embreg.integrations.hf_trainer`: Hugging Face ``transformers.Trainer`` (needs ``pip install 'embreg[nlp]'``).
* :mod:`embreg.integrations.torchrec_md`: mixed-dimension tables as a TorchRec ``EmbeddingBagCollection`` that
  ``DistributedModelParallel`` shards (needs the ``torchrec`` extra, set up as docs/torchrec.md says).
"""
