-- One batch of the to-do list: rows $lo <= rn < $hi.
SELECT caption_id, text
FROM indicators_todo
WHERE rn >= $lo AND rn < $hi
ORDER BY rn;
