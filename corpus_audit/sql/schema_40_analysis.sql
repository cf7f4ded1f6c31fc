-- Tables of the `analyze` stage. Owner: corpus_audit/analysis/

-- %female of a training subset or a generated set, with a Wilson interval.
CREATE TABLE IF NOT EXISTS percent_female (
    side         VARCHAR NOT NULL,           -- training | generated
    model_id     VARCHAR,                    -- generated sets
    strategy     VARCHAR,                    -- training subsets
    occupation   VARCHAR NOT NULL,
    prompt_id    VARCHAR,
    template_id  INTEGER,
    n_female     INTEGER NOT NULL,
    n_male       INTEGER NOT NULL,
    percent_female DOUBLE,                   -- NULL when n_female + n_male = 0
    ci_low       DOUBLE,
    ci_high      DOUBLE
);

-- Amplification per (model, strategy, occupation, prompt template).
CREATE TABLE IF NOT EXISTS amplification (
    model_id     VARCHAR NOT NULL,
    strategy     VARCHAR NOT NULL,
    occupation   VARCHAR NOT NULL,
    template_id  INTEGER NOT NULL,
    training_pf  DOUBLE,
    generated_pf DOUBLE,
    amplification DOUBLE,
    excluded     BOOLEAN NOT NULL,
    exclude_reason VARCHAR                   -- direction_switch | no_training_labels | no_generated_labels
);
