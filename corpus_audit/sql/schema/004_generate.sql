-- Images of OpenAI-compatible image APIs (generate.models entries "openai:<model>";
-- corpus_audit/backends/openai_images.py). Owner: corpus_audit/stages/generate.py (the `generate` stage).
-- Migration 4. Idempotent (IF NOT EXISTS), run in one transaction by Study.migrate.

-- One row per requested image: made (status 'ok', also an `images` + `generated_images` row,
-- written in the same transaction) or refused by the API (status 'refused': no image, the
-- API's code and message; a rerun does not ask again). No seed exists for these APIs: the
-- images cannot be regenerated.
CREATE TABLE IF NOT EXISTS api_images (
    image_id       VARCHAR PRIMARY KEY,      -- the planned images.image_id (model, prompt, index)
    model_id       VARCHAR NOT NULL,         -- as configured, e.g. 'openai:dall-e-3'
    prompt_key     VARCHAR NOT NULL,         -- as generated_images.prompt_key
    image_index    INTEGER NOT NULL,         -- 0-based index of the image within its prompt
    prompt_sent    VARCHAR NOT NULL,         -- the text sent to the API
    size           VARCHAR,                  -- generate.api_size, e.g. '1024x1024'
    quality        VARCHAR,                  -- generate.api_quality (NULL: not sent)
    style          VARCHAR,                  -- generate.api_style (NULL: not sent)
    status         VARCHAR NOT NULL,         -- ok | refused
    revised_prompt VARCHAR,                  -- what the model was actually asked (DALL-E 3 rewrites prompts)
    usage          VARCHAR,                  -- JSON: the answer's usage object, when it has one
    cost_usd       DOUBLE,                   -- generate.api_prices for (model, size, quality); NULL: not listed
    error_code     VARCHAR,                  -- refused: the API's code, e.g. content_policy_violation
    error_message  VARCHAR,                  -- refused: the API's message
    attempts       INTEGER,                  -- requests it took (429/5xx/timeouts retried)
    sha256         VARCHAR,                  -- of the image bytes as the API sent them (stored unchanged)
    created_at     TIMESTAMP NOT NULL        -- UTC
);
