// The sample's home page: reads /actuator/ratelimits every second and draws each bucket, with no
// framework and no build step. Grants and refusals per second come from successive reads of the
// endpoint's counts (granted, rejected), kept for the last minute.
(function () {
	'use strict';

	const HISTORY = 60; // points in a sparkline: one per read, a minute at one read per second
	const SVG = 'http://www.w3.org/2000/svg';
	const container = document.getElementById('buckets');
	const status = document.getElementById('status');
	const loadButton = document.getElementById('load');
	const cards = new Map();
	let previous = null; // the last read: { at: milliseconds, buckets: {...} }

	function element(tag, attributes, text) {
		const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.substring(4)) : document.createElement(tag);
		for (const [name, value] of Object.entries(attributes || {})) {
			node.setAttribute(name, value);
		}
		if (text !== undefined) {
			node.textContent = text;
		}
		return node;
	}

	function number(value) {
		if (typeof value !== 'number' || !isFinite(value)) {
			return String(value);
		}
		return Number.isInteger(value) ? value.toLocaleString('en') : value.toLocaleString('en', { maximumFractionDigits: 1 });
	}

	function duration(iso) {
		// the endpoint's ISO-8601 durations (PT1M18.4S, PT0.25S, PT0S), shown in seconds
		const match = /^PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$/.exec(iso || '');
		if (!match) {
			return iso;
		}
		const seconds = (Number(match[1] || 0) * 3600) + (Number(match[2] || 0) * 60) + Number(match[3] || 0);
		for (const [unit, length] of [['d', 86400], ['h', 3600], ['min', 60]]) {
			if (seconds >= length && seconds % length === 0) {
				return number(seconds / length) + ' ' + unit;
			}
		}
		return number(Math.round(seconds * 10) / 10) + ' s';
	}

	function card(name) {
		const root = element('section', { class: 'bucket', 'data-bucket': name });
		root.append(element('h2', {}, name), element('div', { class: 'settings' }));
		const row = element('div', { class: 'row' });
		const gauge = element('svg:svg', { class: 'gauge', viewBox: '0 0 120 70', role: 'img' });
		gauge.append(
			element('svg:path', { class: 'track', d: 'M 10 62 A 50 50 0 0 1 110 62', fill: 'none', 'stroke-width': 12, pathLength: 100 }),
			element('svg:path', { class: 'level', d: 'M 10 62 A 50 50 0 0 1 110 62', fill: 'none', 'stroke-width': 12, pathLength: 100,
				'stroke-dasharray': '0 100' }),
			element('svg:text', { class: 'available', x: 60, y: 52, 'text-anchor': 'middle' }),
			element('svg:text', { class: 'of', x: 60, y: 67, 'text-anchor': 'middle' }));
		const facts = element('dl');
		for (const [key, label] of [['waiting', 'waiting'], ['inFlight', 'in flight'], ['granted', 'granted'],
				['rejected', 'refused'], ['keys', 'keys'], ['behindSchedule', 'behind']]) {
			facts.append(element('dt', { class: key + '-label' }, label), element('dd', { class: key }));
		}
		row.append(gauge, facts);
		const spark = element('svg:svg', { class: 'spark', viewBox: '0 0 ' + (HISTORY - 1) + ' 48', preserveAspectRatio: 'none' });
		spark.append(
			element('svg:polyline', { class: 'granted', fill: 'none', 'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke' }),
			element('svg:polyline', { class: 'refused', fill: 'none', 'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke' }));
		const legend = element('div', { class: 'legend' });
		legend.append(element('span', { class: 'g granted-rate' }), element('span', {}, 'last minute'),
			element('span', { class: 'r refused-rate' }));
		root.append(row, spark, legend);
		container.append(root);
		return { root, history: [] };
	}

	function show(root, key, value, visible) {
		root.querySelector('dd.' + key).textContent = value;
		root.querySelector('dd.' + key).hidden = !visible;
		root.querySelector('dt.' + key + '-label').hidden = !visible;
	}

	function draw(name, bucket, rates) {
		let entry = cards.get(name);
		if (!entry) {
			entry = card(name);
			cards.set(name, entry);
		}
		const root = entry.root;
		const settings = [bucket.type, number(bucket.rate) + ' per ' + duration(bucket.period), bucket.backend];
		if (bucket.mode !== 'enforce') {
			settings.push(bucket.mode);
		}
		if (bucket.cappedRelease) {
			settings.push('capped');
		}
		root.querySelector('.settings').textContent = settings.join(' · ');
		const share = bucket.limit > 0 ? Math.max(0, Math.min(1, bucket.available / bucket.limit)) : 0;
		// the arc drawn as one dash of share * 100 of the path's 100 units (0: nothing at all)
		root.querySelector('.gauge .level').setAttribute('stroke-dasharray', (share * 100).toFixed(2) + ' 100');
		root.querySelector('.gauge').setAttribute('aria-label', number(bucket.available) + ' of ' + number(bucket.limit) + ' tokens available');
		root.querySelector('.gauge .available').textContent = number(bucket.available);
		root.querySelector('.gauge .of').textContent = 'of ' + number(bucket.limit) + ' available';
		show(root, 'waiting', number(bucket.waiting), true);
		show(root, 'inFlight', number(bucket.inFlight), bucket.cappedRelease);
		show(root, 'granted', number(bucket.granted), true);
		show(root, 'rejected', number(bucket.rejected), true);
		show(root, 'keys', number(bucket.keys), bucket.keys > 0);
		show(root, 'behindSchedule', duration(bucket.behindSchedule), bucket.type === 'hybrid');
		if (rates) {
			entry.history.push(rates);
			if (entry.history.length > HISTORY) {
				entry.history.shift();
			}
		}
		const top = Math.max(1, ...entry.history.map((r) => Math.max(r.granted, r.refused)));
		const offset = HISTORY - entry.history.length;
		const points = (pick) => entry.history
			.map((r, i) => (offset + i) + ',' + (47 - (pick(r) / top) * 45).toFixed(2))
			.join(' ');
		root.querySelector('.spark .granted').setAttribute('points', points((r) => r.granted));
		root.querySelector('.spark .refused').setAttribute('points', points((r) => r.refused));
		const last = entry.history[entry.history.length - 1];
		root.querySelector('.granted-rate').textContent = 'granted ' + (last ? number(Math.round(last.granted * 10) / 10) : '-') + '/s';
		root.querySelector('.refused-rate').textContent = 'refused ' + (last ? number(Math.round(last.refused * 10) / 10) : '-') + '/s';
	}

	async function refresh() {
		try {
			const response = await fetch('actuator/ratelimits', { headers: { Accept: 'application/json' } });
			if (!response.ok) {
				throw new Error('GET /actuator/ratelimits answered ' + response.status);
			}
			const buckets = (await response.json()).buckets;
			const at = Date.now();
			for (const [name, bucket] of Object.entries(buckets)) {
				let rates = null;
				const before = previous && previous.buckets[name];
				if (before) {
					const seconds = Math.max(0.001, (at - previous.at) / 1000);
					rates = {
						granted: Math.max(0, bucket.granted - before.granted) / seconds,
						refused: Math.max(0, bucket.rejected - before.rejected) / seconds
					};
				}
				draw(name, bucket, rates);
			}
			previous = { at, buckets };
			if (status.dataset.readFailed) {
				delete status.dataset.readFailed;
				status.textContent = '';
				status.classList.remove('error');
			}
		}
		catch (error) {
			status.dataset.readFailed = 'true';
			status.textContent = 'cannot read the buckets: ' + error.message;
			status.classList.add('error');
		}
		finally {
			setTimeout(refresh, 1000);
		}
	}

	loadButton.addEventListener('click', async () => {
		loadButton.disabled = true;
		status.classList.remove('error');
		status.textContent = 'running the load for 5 s...';
		try {
			const response = await fetch('load?seconds=5', { method: 'POST' });
			if (!response.ok) {
				throw new Error('POST /load answered ' + response.status);
			}
			const result = await response.json();
			let granted = 0;
			let refused = 0;
			for (const counts of Object.values(result)) {
				granted += counts.granted || 0;
				refused += counts.rejected || 0;
			}
			status.textContent = 'load done: ' + number(granted) + ' granted, ' + number(refused) + ' refused';
		}
		catch (error) {
			status.textContent = 'the load failed: ' + error.message;
			status.classList.add('error');
		}
		finally {
			loadButton.disabled = false;
		}
	});

	refresh();
})();
