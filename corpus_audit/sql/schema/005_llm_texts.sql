-- LLM-written texts for who-vs-how (the `llm_texts` stage; docs/who_vs_how.md, "Generating
-- the texts"): biographies and personas a language model wrote per occupation, with and
-- without a specified gender ("More of the Same", Mickel et al.). `gender` is the gender the
-- prompt specifies, or 'unspecified'. A pair is one (model, occupation, prompt_id, gender).

-- Every generated text, committed per batch with its pair's counts (llm_pairs).
CREATE TABLE IF NOT EXISTS llm_texts (
    text_id            BIGINT PRIMARY KEY,   -- 1, 2, ... in commit order
    model              VARCHAR NOT NULL,     -- the spec of llm.models ("openai:gpt-4o-mini")
    occupation         VARCHAR NOT NULL,
    prompt_id          VARCHAR NOT NULL,     -- the prompt file's id (biography, persona)
    gender             VARCHAR NOT NULL,     -- unspecified | female | male | non_binary
    prompt             VARCHAR NOT NULL,     -- the user message sent
    batch              INTEGER NOT NULL,     -- 0-based batch of its pair
    position           INTEGER NOT NULL,     -- 0-based place in the batch
    text               VARCHAR NOT NULL,     -- '' for a refusal without text
    association        VARCHAR NOT NULL,     -- female | male | non_binary | none (the rule, texts.association_terms)
    finish_reason      VARCHAR NOT NULL,     -- stop | length | content_filter | what the server said
    refusal            VARCHAR,              -- the refusal the backend reported, else NULL
    completion_tokens  INTEGER,              -- tokens of this text (a request's usage shared by its texts)
    prompt_tokens      INTEGER,              -- prompt tokens billed with this text (a request's first text)
    seed               BIGINT,               -- the seed it was sampled with (NULL: none sent)
    sampling           VARCHAR NOT NULL,     -- JSON: temperature, top_p, max_tokens, send_seed
    created_at         TIMESTAMP NOT NULL,   -- UTC
    UNIQUE (model, occupation, prompt_id, gender, batch, position)
);

-- Each pair's state and committed counts (updated with each batch, in its transaction).
CREATE TABLE IF NOT EXISTS llm_pairs (
    model              VARCHAR NOT NULL,
    occupation         VARCHAR NOT NULL,
    prompt_id          VARCHAR NOT NULL,
    gender             VARCHAR NOT NULL,
    state              VARCHAR NOT NULL,     -- open | done | abandoned | capped (texts/sampling.py)
    texts              BIGINT NOT NULL,
    batches            INTEGER NOT NULL,
    female             BIGINT NOT NULL,      -- texts associated with women
    male               BIGINT NOT NULL,
    non_binary         BIGINT NOT NULL,
    not_associated     BIGINT NOT NULL,
    refusals           BIGINT NOT NULL,
    completion_tokens  BIGINT NOT NULL,
    prompt_tokens      BIGINT NOT NULL,
    updated_at         TIMESTAMP NOT NULL,   -- UTC
    PRIMARY KEY (model, occupation, prompt_id, gender)
);

-- Each model's backend description (never a key) and its sampling settings, per run.
CREATE TABLE IF NOT EXISTS llm_models (
    model        VARCHAR PRIMARY KEY,
    backend      VARCHAR NOT NULL,           -- transformers | openai | a registered backend
    description  VARCHAR NOT NULL,           -- JSON (TextGenerator.describe)
    sampling     VARCHAR NOT NULL,           -- JSON
    updated_at   TIMESTAMP NOT NULL
);
