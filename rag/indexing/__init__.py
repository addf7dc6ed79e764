"""rag.indexing: load, chunk, embed and store documents; persistent knowledge bases.

Modules (imported on demand, nothing heavy at package import):

- `loaders`: `load_file`, `load_directory`, `iter_files`, `clean_text` (`rst`: rst titles as `#` headings);
- `formats`: the `Loader` and `Chunker` protocols, `register_loader` (by suffix), `register_chunker` (by
  file type) and the `rag.loaders` / `rag.chunkers` entry points of installed plugins;
- `tables`: PDF tables (pdfplumber on pages that look tabular), kept whole as chunks;
- `chunking` / `tokens`: `TokenChunker`, `PassthroughChunker`, `split_documents` (MiniLM word pieces
  and a character bound; `headings` names sections);
- `autocontext`: `AutoContext`, `extractive_summary`;
- `tags`: `KeywordTagger`, `tag_filter`;
- `embedding_cache`: `CachedEmbeddings`;
- the collaborators `rag.KnowledgeBase` owns: `kb_parts` (`IndexTarget`, its storage: manifest, lock,
  records, chunk store, components; `kb_settings` checks its name and settings) and `sync` (`Syncer`);
  `write_path` (`index_sources`: the one write path, which every front door calls); and their parts:
  `plan`, `moves`, `executors` / `ray_executor` / `ingest`, `records`, `manifest`, `locking`, `kb_retriever`;
- `neighbours`: chunks around a `(doc_id, chunk_index)`.
"""
