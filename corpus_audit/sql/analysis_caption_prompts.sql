-- Captions as prompts (METHODS 1.5, the lower bound: P_o := S_o) and paraphrased captions.
-- Generated images whose prompt was a caption (images.caption_id set, source generated) belong
-- to every per-occupation sample (samples.prompt_id NULL: keyword, no_indicators) that holds
-- their caption; images.strategy only names the first strategy that asked for the caption
-- (see generate_caption_images.sql), and 'paraphrased:...' marks a paraphrase of the caption.
-- Paraphrase images count only for the occupation they were paraphrased for.
-- Per (model, set, occupation): the generated images, next to the training images of the SAME
-- captions (those that were used as prompts), so T and G describe one set of captions.
-- Set names: captions_as_prompts (keyword sample), captions_as_prompts_<strategy> otherwise;
-- paraphrased_captions, paraphrased_captions_<strategy>.
WITH gen AS (
    SELECT DISTINCT
        i.image_id,
        coalesce(i.model_id, 'unknown') AS model_id,
        i.caption_id,
        s.occupation,
        CASE WHEN coalesce(i.strategy, '') LIKE 'paraphrased:%' THEN 'paraphrased_captions'
             ELSE 'captions_as_prompts' END
        || CASE WHEN s.strategy = 'keyword' THEN '' ELSE '_' || s.strategy END AS strategy
    FROM images i
    JOIN samples s
      ON s.caption_id = i.caption_id
     AND s.prompt_id IS NULL
     AND (coalesce(i.strategy, '') NOT LIKE 'paraphrased:%' OR s.occupation = i.occupation)
    WHERE i.source = 'generated' AND i.caption_id IS NOT NULL
),
gen_counts AS (
    SELECT
        g.model_id, g.strategy, g.occupation,
        count(DISTINCT g.image_id) AS n_images,
        count(DISTINCT g.image_id) FILTER (WHERE a.label = 'female') AS n_female,
        count(DISTINCT g.image_id) FILTER (WHERE a.label = 'male') AS n_male
    FROM gen g
    LEFT JOIN analysis_labelled a ON a.image_id = g.image_id
    GROUP BY ALL
),
train_counts AS (
    SELECT
        c.model_id, c.strategy, c.occupation,
        count(DISTINCT t.image_id) AS n_images,
        count(DISTINCT t.image_id) FILTER (WHERE a.label = 'female') AS n_female,
        count(DISTINCT t.image_id) FILTER (WHERE a.label = 'male') AS n_male
    FROM (SELECT DISTINCT model_id, strategy, occupation, caption_id FROM gen) c
    LEFT JOIN images t ON t.source = 'training' AND t.caption_id = c.caption_id
    LEFT JOIN analysis_labelled a ON a.image_id = t.image_id
    GROUP BY ALL
)
SELECT
    g.model_id, g.strategy, g.occupation,
    coalesce(t.n_images, 0) AS train_images,
    coalesce(t.n_female, 0) AS train_female,
    coalesce(t.n_male, 0) AS train_male,
    g.n_images AS gen_images,
    g.n_female AS gen_female,
    g.n_male AS gen_male
FROM gen_counts g
LEFT JOIN train_counts t USING (model_id, strategy, occupation)
ORDER BY g.model_id, g.strategy, g.occupation;
